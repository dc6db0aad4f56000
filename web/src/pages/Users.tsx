import { useState, type FormEvent } from 'react';
import { api, ApiError, describe } from '../lib/api';
import type { User } from '../lib/session';
import { useApi } from '../lib/useApi';
import { ErrorText, Field, Loading, Modal } from '../components/ui';

/** The built-in roles, offered when the platform's list of roles cannot be read. */
const BUILTIN_ROLES = ['admin', 'editor', 'installer', 'viewerBasic', 'viewerStandard', 'viewerFull'];

/** The roles a user may be given, as the platform lists them (built-in and custom); the built-in ones while that list cannot be read. */
function useRoleNames(): { names: string[]; error: string | null } {
  const { data, error } = useApi<{ name: string }[]>('/api/roles', 'Listing the roles');
  return { names: data ? data.map((r) => r.name) : BUILTIN_ROLES, error };
}

const rolesOf = (u: User) => u.attributes?.roles ?? [];

/** Users (admins): create with a one-time temporary password, change roles, disable, reset a password. */
export default function Users() {
  const { data, error, reload } = useApi<User[]>('/api/users?limit=1000', 'Listing users');
  const [actionError, setActionError] = useState<string | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [editing, setEditing] = useState<User | null>(null);
  const roles = useRoleNames();
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
      <ErrorText>{error ?? actionError ?? roles.error}</ErrorText>
      {secret && (
        <p className="notice" role="status">
          {secret}
        </p>
      )}
      <NewUser
        roles={roles.names}
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
                <td>{rolesOf(u).length ? rolesOf(u).join(', ') : 'none (a viewerBasic)'}</td>
                <td>{u.enabled === false ? 'no' : 'yes'}</td>
                <td className="row">
                  <button type="button" className="small" aria-label={`Change the roles of ${u.username}`} onClick={() => setEditing(u)}>
                    Roles
                  </button>
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
      {editing && (
        <RolesDialog
          user={editing}
          offered={roles.names}
          onClose={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            void reload();
          }}
        />
      )}
    </section>
  );
}

/** A multiple choice of roles; `chosen` roles not offered (a custom role since deleted) are listed too, so none is dropped unseen. */
function RoleSelect({ id, offered, chosen, onChange, describedBy }: { id: string; offered: string[]; chosen: string[]; onChange: (roles: string[]) => void; describedBy?: string }) {
  const names = [...offered, ...chosen.filter((r) => !offered.includes(r))];
  return (
    <select id={id} multiple size={Math.min(names.length, 8)} value={chosen} aria-describedby={describedBy} onChange={(e) => onChange([...e.target.selectedOptions].map((o) => o.value))}>
      {names.map((r) => (
        <option key={r} value={r}>
          {r}
        </option>
      ))}
    </select>
  );
}

/** A user's roles, all of them, changed as a set: the PATCH carries every role the user keeps. */
function RolesDialog({ user, offered, onClose, onSaved }: { user: User; offered: string[]; onClose: () => void; onSaved: () => void }) {
  const [chosen, setChosen] = useState<string[]>(rolesOf(user));
  const [error, setError] = useState<string | null>(null);
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      await api('PATCH', `/api/users/${user.id}`, { body: { attributes: { roles: chosen } } });
      onSaved();
    } catch (err) {
      setError(describe(err, 'Changing the roles'));
    }
  };
  return (
    <Modal title={`Roles of ${user.username}`} onClose={onClose}>
      <form onSubmit={save}>
        <div className="field">
          <label htmlFor="user-roles">Roles</label>
          <RoleSelect id="user-roles" offered={offered} chosen={chosen} onChange={setChosen} describedBy="user-roles-hint" />
          <small id="user-roles-hint" className="muted">
            Ctrl- or Cmd-click to choose several. With none, the user is a viewerBasic.
          </small>
        </div>
        <ErrorText>{error}</ErrorText>
        <div className="row">
          <button type="submit" className="primary">
            Save
          </button>
          <button type="button" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Modal>
  );
}

function NewUser({ roles, onCreated }: { roles: string[]; onCreated: (username: string, password: string) => void }) {
  const [username, setUsername] = useState('');
  const [email, setEmail] = useState('');
  const [chosen, setChosen] = useState<string[]>(['viewerBasic']);
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setError(null);
    try {
      const body: Record<string, unknown> = { username, attributes: { roles: chosen } };
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
        <label htmlFor="new-roles">Roles</label>
        <RoleSelect id="new-roles" offered={roles} chosen={chosen} onChange={setChosen} />
      </div>
      <button type="submit" className="primary">
        Create user
      </button>
      <ErrorText>{error}</ErrorText>
    </form>
  );
}
