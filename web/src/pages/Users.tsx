import { useState, type FormEvent } from 'react';
import { api, ApiError, describe } from '../lib/api';
import type { User } from '../lib/session';
import { useApi } from '../lib/useApi';
import { ErrorText, Field, Loading } from '../components/ui';

const ROLES = ['admin', 'editor', 'installer', 'viewerBasic', 'viewerStandard', 'viewerFull'];

/** Users (admins): create with a one-time temporary password, change roles, disable, reset a password. */
export default function Users() {
  const { data, error, reload } = useApi<User[]>('/api/users?limit=1000', 'Listing users');
  const [actionError, setActionError] = useState<string | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const act = async (what: string, fn: () => Promise<unknown>) => {
    setActionError(null);
    try {
      await fn();
      await reload();
    } catch (e) {
      setActionError(describe(e, what));
    }
  };
  return (
    <section aria-labelledby="users-title">
      <h1 id="users-title">Users</h1>
      <ErrorText>{error ?? actionError}</ErrorText>
      {secret && (
        <p className="notice" role="status">
          {secret}
        </p>
      )}
      <NewUser
        onCreated={(u, password) => {
          setSecret(`${u} was created with the temporary password ${password}. Give it to them; they choose their own at first login.`);
          void reload();
        }}
      />
      {!data && !error && <Loading />}
      {data && (
        <table className="table">
          <thead>
            <tr>
              <th scope="col">Username</th>
              <th scope="col">Roles</th>
              <th scope="col">Enabled</th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {data.map((u) => (
              <tr key={u.id}>
                <td>{u.username}</td>
                <td>
                  <label className="sr-only" htmlFor={`role-${u.id}`}>
                    Role of {u.username}
                  </label>
                  <select id={`role-${u.id}`} value={u.attributes?.roles?.[0] ?? 'viewerBasic'} onChange={(e) => void act('Changing the role', () => api('PATCH', `/api/users/${u.id}`, { body: { attributes: { roles: [e.target.value] } } }))}>
                    {ROLES.map((r) => (
                      <option key={r}>{r}</option>
                    ))}
                  </select>
                </td>
                <td>{u.enabled === false ? 'no' : 'yes'}</td>
                <td className="row">
                  <button type="button" className="small" onClick={() => void act('Changing the account', () => api('PATCH', `/api/users/${u.id}`, { body: { enabled: u.enabled === false } }))}>
                    {u.enabled === false ? 'Enable' : 'Disable'}
                  </button>
                  <button
                    type="button"
                    className="small"
                    onClick={() =>
                      void act('Resetting the password', async () => {
                        const r = await api<{ temporaryPassword: string }>('POST', `/api/users/${u.id}/reset-password`);
                        setSecret(`The new temporary password of ${u.username} is ${r.temporaryPassword}.`);
                      })
                    }
                  >
                    Reset password
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function NewUser({ onCreated }: { onCreated: (username: string, password: string) => void }) {
  const [username, setUsername] = useState('');
  const [email, setEmail] = useState('');
  const [role, setRole] = useState('viewerBasic');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setError(null);
    try {
      const body: Record<string, unknown> = { username, attributes: { roles: [role] } };
      if (email) body.email = email;
      const u = await api<{ username: string; temporaryPassword: string }>('POST', '/api/users', { body });
      setUsername('');
      setEmail('');
      onCreated(u.username, u.temporaryPassword);
    } catch (err) {
      if (err instanceof ApiError && err.field) setErrors({ [err.field]: `${err.field} ${err.why}` });
      else setError(describe(err, 'Creating the user'));
    }
  };
  return (
    <form className="card row" onSubmit={submit} aria-label="New user">
      <Field label="Username" error={errors.username}>
        {(id, d) => <input id={id} value={username} onChange={(e) => setUsername(e.target.value)} aria-describedby={d} aria-invalid={!!errors.username} />}
      </Field>
      <Field label="Email" error={errors.email}>
        {(id, d) => <input id={id} value={email} onChange={(e) => setEmail(e.target.value)} aria-describedby={d} aria-invalid={!!errors.email} />}
      </Field>
      <div className="field">
        <label htmlFor="new-role">Role</label>
        <select id="new-role" value={role} onChange={(e) => setRole(e.target.value)}>
          {ROLES.map((r) => (
            <option key={r}>{r}</option>
          ))}
        </select>
      </div>
      <button type="submit" className="primary">
        Create user
      </button>
      <ErrorText>{error}</ErrorText>
    </form>
  );
}
