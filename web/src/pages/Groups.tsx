import { useState, type FormEvent } from 'react';
import { api, ApiError, describe } from '../lib/api';
import { can } from '../lib/session';
import { useApi } from '../lib/useApi';
import { ErrorText, Field, Loading } from '../components/ui';

interface Group {
  _id: string;
  name: string;
  owner: string;
  members?: { id: string; username: string }[];
}

/** User groups and their members. */
export default function Groups() {
  const { data, error, reload } = useApi<Group[]>('/api/usergroups', 'Listing groups');
  const [name, setName] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [actionError, setActionError] = useState<string | null>(null);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setActionError(null);
    try {
      await api('POST', '/api/usergroups', { body: { name } });
      setName('');
      await reload();
    } catch (err) {
      if (err instanceof ApiError && err.field) setErrors({ [err.field]: `${err.field} ${err.why}` });
      else setActionError(describe(err, 'Creating the group'));
    }
  };
  return (
    <section aria-labelledby="groups-title">
      <h1 id="groups-title">Groups</h1>
      <ErrorText>{error ?? actionError}</ErrorText>
      {can('usergroup', 'POST') && (
        <form className="card row" onSubmit={create} aria-label="New group">
          <Field label="Group name" error={errors.name} hint="2 to 60 characters.">
            {(id, d) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} aria-invalid={!!errors.name} />}
          </Field>
          <button type="submit" className="primary">
            Create group
          </button>
        </form>
      )}
      {!data && !error && <Loading />}
      {data?.length === 0 && <p className="muted">No groups yet.</p>}
      {data?.map((g) => <GroupCard key={g._id} group={g} onChange={reload} />)}
    </section>
  );
}

function GroupCard({ group, onChange }: { group: Group; onChange: () => void }) {
  const { data, reload } = useApi<Group>(`/api/usergroups/${group._id}?includeMembers=true`, 'Reading the members');
  const [username, setUsername] = useState('');
  const [error, setError] = useState<string | null>(null);
  const add = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const found = await api<{ id: string; username: string }[]>('GET', `/api/users?${new URLSearchParams({ username })}`);
      const user = found.find((u) => u.username.toLowerCase() === username.toLowerCase());
      if (!user) return setError(`No user named ${username}.`);
      await api('POST', `/api/usergroups/${group._id}/members`, { body: { userId: user.id } });
      setUsername('');
      await reload();
    } catch (err) {
      setError(describe(err, 'Adding the member'));
    }
  };
  const remove = async (id: string) => {
    try {
      await api('DELETE', `/api/usergroups/${group._id}/members/${id}`);
      await reload();
    } catch (err) {
      setError(describe(err, 'Removing the member'));
    }
  };
  const del = async () => {
    try {
      await api('DELETE', `/api/usergroups/${group._id}`);
      onChange();
    } catch (err) {
      setError(describe(err, 'Deleting the group'));
    }
  };
  return (
    <div className="card" role="region" aria-label={`Group ${group.name}`}>
      <div className="page-head">
        <h2>{group.name}</h2>
        {can('usergroup', 'DELETE') && (
          <button type="button" className="small danger" onClick={() => void del()}>
            Delete group
          </button>
        )}
      </div>
      <ul className="plain-list">
        {data?.members?.map((m) => (
          <li key={m.id}>
            {m.username}{' '}
            <button type="button" className="small" onClick={() => void remove(m.id)} aria-label={`Remove ${m.username}`}>
              Remove
            </button>
          </li>
        ))}
      </ul>
      <form className="row" onSubmit={add}>
        <label htmlFor={`member-${group._id}`}>Add a member by username</label>
        <input id={`member-${group._id}`} value={username} onChange={(e) => setUsername(e.target.value)} style={{ maxWidth: '16em' }} />
        <button type="submit">Add</button>
      </form>
      <ErrorText>{error}</ErrorText>
    </div>
  );
}
