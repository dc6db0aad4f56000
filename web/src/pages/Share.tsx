import { useEffect, useState } from 'react';
import { api, describe, get } from '../lib/api';
import { ErrorText, Loading, Modal } from '../components/ui';

interface Right {
  subjectType: string;
  subjectId: string;
  scope: string[];
}
interface Subject {
  type: 'user' | 'group';
  id: string;
  name: string;
}

/**
 * Sharing in two clicks: pick a user or group, then the access to give
 * (`POST /api/access-rights`). Rights already given are listed and removable.
 */
export default function ShareDialog({ resourceId, resourceType, name, onClose }: { resourceId: string; resourceType: string; name: string; onClose: () => void }) {
  const [subjects, setSubjects] = useState<Subject[] | null>(null);
  const [rights, setRights] = useState<Right[]>([]);
  const [picked, setPicked] = useState<Subject | null>(null);
  const [filter, setFilter] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [done, setDone] = useState<string | null>(null);
  const loadRights = () => get<Right[]>(`/api/access-rights/resource/${resourceId}`).then(setRights, (e) => setError(describe(e, 'Reading who has access')));
  useEffect(() => {
    Promise.all([get<{ id: string; username: string }[]>('/api/users?limit=1000'), get<{ _id: string; name: string }[]>('/api/usergroups')]).then(
      ([users, groups]) => setSubjects([...groups.map((g): Subject => ({ type: 'group', id: g._id, name: g.name })), ...users.map((u): Subject => ({ type: 'user', id: u.id, name: u.username }))]),
      (e) => setError(describe(e, 'Listing users and groups')),
    );
    void loadRights();
  }, [resourceId]);
  const nameOf = (r: Right) => subjects?.find((s) => s.id === r.subjectId)?.name ?? r.subjectId;
  const give = async (scope: string[]) => {
    if (!picked) return;
    setError(null);
    try {
      await api('POST', '/api/access-rights', { body: { resourceType, resourceId, subjectType: picked.type === 'user' ? 'singleton' : 'group', subjectId: picked.id, scope } });
      setDone(`${picked.name} can now ${scope.includes('write') ? 'change' : 'see'} ${name}.`);
      setPicked(null);
      await loadRights();
    } catch (e) {
      setError(describe(e, 'Sharing'));
    }
  };
  const revoke = async (r: Right) => {
    try {
      await api('DELETE', '/api/access-rights', { body: { resourceType, resourceId, subjectType: r.subjectType === 'user' ? 'singleton' : r.subjectType, subjectId: r.subjectId } });
      await loadRights();
    } catch (e) {
      setError(describe(e, 'Removing the access'));
    }
  };
  const shown = subjects?.filter((s) => s.name.toLowerCase().includes(filter.toLowerCase())).slice(0, 50);
  return (
    <Modal title={`Share ${name}`} onClose={onClose} wide>
      <ErrorText>{error}</ErrorText>
      {done && (
        <p className="ok" role="status">
          {done}
        </p>
      )}
      <div className="field">
        <label htmlFor="share-filter">Find a user or group</label>
        <input id="share-filter" type="search" value={filter} onChange={(e) => setFilter(e.target.value)} />
      </div>
      {!subjects && !error && <Loading />}
      {shown && (
        <ul className="pick-list" aria-label="Users and groups">
          {shown.map((s) => (
            <li key={`${s.type}:${s.id}`}>
              <button type="button" className={picked?.id === s.id ? 'picked' : ''} aria-pressed={picked?.id === s.id} onClick={() => setPicked(s)}>
                {s.type === 'group' ? 'Group' : 'User'}: {s.name}
              </button>
            </li>
          ))}
        </ul>
      )}
      <div className="row">
        <button type="button" className="primary" disabled={!picked} onClick={() => void give(['read'])}>
          Give view access{picked ? ` to ${picked.name}` : ''}
        </button>
        <button type="button" disabled={!picked} onClick={() => void give(['read', 'write'])}>
          Give edit access{picked ? ` to ${picked.name}` : ''}
        </button>
      </div>
      <h3>Who has access</h3>
      <ul className="plain-list">
        {rights.map((r) => (
          <li key={`${r.subjectType}:${r.subjectId}`}>
            {r.subjectType === 'group' ? 'Group' : 'User'} {nameOf(r)}: {r.scope.join(', ')}{' '}
            <button type="button" className="small" onClick={() => void revoke(r)}>
              Remove
            </button>
          </li>
        ))}
      </ul>
    </Modal>
  );
}
