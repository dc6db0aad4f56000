import { useState, type FormEvent } from 'react';
import { ApiError, describe } from '../lib/api';
import { logIn } from '../lib/session';
import { ErrorText } from '../components/ui';

/** The login form; `reason` tells why it is shown (an expired session). */
export function LoginForm({ reason, onDone }: { reason?: string; onDone?: () => void }) {
  const [username, setUsername] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await logIn(username.trim(), password);
      onDone?.();
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'Wrong username or password, or the account is disabled.' : describe(err, 'Logging in'));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="login" onSubmit={submit} aria-label="Log in">
      {reason && <p className="notice">{reason}</p>}
      <div className="field">
        <label htmlFor="login-username">Username</label>
        <input id="login-username" name="username" autoComplete="username" required value={username} onChange={(e) => setUsername(e.target.value)} autoFocus />
      </div>
      <div className="field">
        <label htmlFor="login-password">Password</label>
        <input id="login-password" name="password" type="password" autoComplete="current-password" required value={password} onChange={(e) => setPassword(e.target.value)} />
      </div>
      <ErrorText>{error}</ErrorText>
      <button type="submit" className="primary" disabled={busy}>
        {busy ? 'Logging in…' : 'Log in'}
      </button>
    </form>
  );
}

export default function LoginPage() {
  return (
    <main className="center">
      <div className="card narrow">
        <h1>Device platform</h1>
        <LoginForm />
      </div>
    </main>
  );
}
