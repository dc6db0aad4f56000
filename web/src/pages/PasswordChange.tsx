import { useState, type FormEvent } from 'react';
import { api, describe, ApiError } from '../lib/api';
import { logOut, renewToken } from '../lib/session';
import { ErrorText, Field } from '../components/ui';

/** Setting one's own password; forced while `requiredActions` holds `UPDATE_PASSWORD`. */
export default function PasswordChange({ forced }: { forced?: boolean }) {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [repeat, setRepeat] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setError(null);
    if (next !== repeat) return setErrors({ repeat: 'The two new passwords differ.' });
    try {
      // Every token issued before the change stops working: the answer carries a fresh one, used from here on.
      const { token } = await api<{ token: string }>('PUT', '/api/auth/password', { body: { currentPassword: current, newPassword: next } });
      setDone(true);
      await renewToken(token);
    } catch (err) {
      if (err instanceof ApiError && err.field) setErrors({ [err.field]: `${err.field === 'currentPassword' ? 'The current password' : 'The new password'} ${err.why}` });
      else setError(describe(err, 'Changing the password'));
    }
  };
  return (
    <main className="center">
      <form className="card narrow" onSubmit={submit} aria-labelledby="pw-title">
        <h1 id="pw-title">{forced ? 'Choose your own password' : 'Change password'}</h1>
        {forced && <p className="notice">Your account has a temporary password. Choose your own before you go on.</p>}
        <Field label="Current password" error={errors.currentPassword}>
          {(id, d) => <input id={id} type="password" autoComplete="current-password" required value={current} onChange={(e) => setCurrent(e.target.value)} aria-describedby={d} aria-invalid={!!errors.currentPassword} />}
        </Field>
        <Field label="New password" error={errors.newPassword} hint="At least 8 characters.">
          {(id, d) => <input id={id} type="password" autoComplete="new-password" required value={next} onChange={(e) => setNext(e.target.value)} aria-describedby={d} aria-invalid={!!errors.newPassword} />}
        </Field>
        <Field label="New password again" error={errors.repeat}>
          {(id, d) => <input id={id} type="password" autoComplete="new-password" required value={repeat} onChange={(e) => setRepeat(e.target.value)} aria-describedby={d} aria-invalid={!!errors.repeat} />}
        </Field>
        <ErrorText>{error}</ErrorText>
        {done && <p role="status">Password changed.</p>}
        <div className="row">
          <button type="submit" className="primary">
            Set password
          </button>
          {forced && (
            <button type="button" onClick={logOut}>
              Log out
            </button>
          )}
        </div>
      </form>
    </main>
  );
}
