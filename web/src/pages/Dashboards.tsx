import { useEffect, useState, type FormEvent } from 'react';
import { Link, useNavigate } from 'react-router';
import { api, ApiError, describe, get } from '../lib/api';
import { can } from '../lib/session';
import { fromBase64 } from '../lib/format';
import { ErrorText, Field, Loading, Modal } from '../components/ui';

interface DashboardSummary {
  _id: string;
  name: string;
  title?: string;
  description?: string;
  widgets: unknown[];
}

/** The dashboard picker: every dashboard the user can read, a new one, an import. */
export default function Dashboards() {
  const [list, setList] = useState<DashboardSummary[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [filter, setFilter] = useState('');
  const [dialog, setDialog] = useState<'new' | 'import' | null>(null);
  useEffect(() => {
    get<DashboardSummary[]>('/api/dashboards').then(setList, (e) => setError(describe(e, 'Listing dashboards')));
  }, []);
  const shown = list?.filter((d) => d.name.toLowerCase().includes(filter.toLowerCase()));
  return (
    <section aria-labelledby="dash-title">
      <div className="page-head">
        <h1 id="dash-title">Dashboards</h1>
        {can('dashboard', 'POST') && (
          <div className="row">
            <button type="button" className="primary" onClick={() => setDialog('new')}>
              New dashboard
            </button>
            <button type="button" onClick={() => setDialog('import')}>
              Import
            </button>
          </div>
        )}
      </div>
      <ErrorText>{error}</ErrorText>
      {!list && !error && <Loading what="Loading dashboards" />}
      {list && (
        <>
          <div className="field inline">
            <label htmlFor="dash-filter">Find</label>
            <input id="dash-filter" type="search" value={filter} onChange={(e) => setFilter(e.target.value)} />
          </div>
          {shown!.length === 0 ? (
            <p className="muted">{list.length ? 'No dashboard matches.' : 'No dashboards yet.'}</p>
          ) : (
            <ul className="cards" aria-label="Dashboards">
              {shown!.map((d) => (
                <li key={d._id} className="card">
                  <Link to={`/dashboards/${d._id}`} className="card-link">
                    <strong>{d.name}</strong>
                  </Link>
                  {d.title && <span>{d.title}</span>}
                  <small className="muted">{d.widgets.length} widgets</small>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
      {dialog === 'new' && <NewDashboard onClose={() => setDialog(null)} />}
      {dialog === 'import' && <ImportDashboard onClose={() => setDialog(null)} />}
    </section>
  );
}

function NewDashboard({ onClose }: { onClose: () => void }) {
  const navigate = useNavigate();
  const [name, setName] = useState('');
  const [title, setTitle] = useState('');
  const [errors, setErrors] = useState<Record<string, string>>({});
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setErrors({});
    setError(null);
    try {
      const body: Record<string, string> = { name };
      if (title) body.title = title;
      const created = await api<{ _id: string }>('POST', '/api/dashboards', { body });
      navigate(`/dashboards/${created._id}?edit=1`);
    } catch (err) {
      if (err instanceof ApiError && err.field) setErrors({ [err.field]: `${err.field} ${err.why}` });
      else setError(describe(err, 'Creating the dashboard'));
    }
  };
  return (
    <Modal title="New dashboard" onClose={onClose}>
      <form onSubmit={submit}>
        <Field label="Name" error={errors.name} hint="Shown in this list; at most 50 characters.">
          {(id, d) => <input id={id} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={d} aria-invalid={!!errors.name} autoFocus />}
        </Field>
        <Field label="Title" error={errors.title} hint="The header text; optional.">
          {(id, d) => <input id={id} value={title} onChange={(e) => setTitle(e.target.value)} aria-describedby={d} aria-invalid={!!errors.title} />}
        </Field>
        <ErrorText>{error}</ErrorText>
        <div className="row">
          <button type="submit" className="primary">
            Create
          </button>
          <button type="button" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Modal>
  );
}

function ImportDashboard({ onClose }: { onClose: () => void }) {
  const navigate = useNavigate();
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    let body: unknown;
    try {
      body = JSON.parse(fromBase64(text.trim()));
    } catch {
      return setError('This is not an export: paste the base64 text that Export gives.');
    }
    try {
      const created = await api<{ _id: string }>('POST', '/api/dashboards', { body });
      navigate(`/dashboards/${created._id}`);
    } catch (err) {
      setError(describe(err, 'Importing the dashboard'));
    }
  };
  return (
    <Modal title="Import a dashboard" onClose={onClose}>
      <form onSubmit={submit}>
        <div className="field">
          <label htmlFor="import-text">Export text (base64)</label>
          <textarea id="import-text" rows={8} value={text} onChange={(e) => setText(e.target.value)} required autoFocus />
        </div>
        <ErrorText>{error}</ErrorText>
        <div className="row">
          <button type="submit" className="primary">
            Import
          </button>
          <button type="button" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </Modal>
  );
}
