import { useState } from 'react';
import { Link } from 'react-router';
import { useApi } from '../lib/useApi';
import { relativeTime } from '../lib/format';
import { ErrorText, Loading } from '../components/ui';

interface Row {
  _id: string;
  name: string;
  category?: string;
  reportedAt?: string;
  updatedAt?: string;
}

const PAGE = 25;

/** Devices: paged, filtered by name or category, with the total count (`options=count`). */
export default function Devices() {
  const [name, setName] = useState('');
  const [category, setCategory] = useState('');
  const [orderBy, setOrderBy] = useState('name');
  const [page, setPage] = useState(0);
  const q = new URLSearchParams({ limit: String(PAGE), offset: String(page * PAGE), orderBy, options: 'count', fields: 'name,category,reportedAt,updatedAt' });
  if (name) q.set('filter[name]', name);
  if (category) q.set('filter[category]', category);
  const { data, headers, error, stale } = useApi<Row[]>(`/api/iotnodes?${q}`, 'Listing devices');
  const total = Number(headers?.get('x-total-count') ?? NaN);
  const pages = Number.isFinite(total) ? Math.max(1, Math.ceil(total / PAGE)) : 1;
  return (
    <section aria-labelledby="devices-title">
      <div className="page-head">
        <h1 id="devices-title">Devices</h1>
        {Number.isFinite(total) && (
          <span className="muted" role="status" aria-live="polite">
            {total} device{total === 1 ? '' : 's'}
          </span>
        )}
      </div>
      <form className="row" role="search" onSubmit={(e) => e.preventDefault()}>
        <div className="field">
          <label htmlFor="dev-name">Name contains</label>
          <input id="dev-name" type="search" value={name} onChange={(e) => (setName(e.target.value), setPage(0))} />
        </div>
        <div className="field">
          <label htmlFor="dev-category">Category</label>
          <input id="dev-category" type="search" value={category} onChange={(e) => (setCategory(e.target.value), setPage(0))} />
        </div>
        <div className="field">
          <label htmlFor="dev-order">Order by</label>
          <select id="dev-order" value={orderBy} onChange={(e) => setOrderBy(e.target.value)}>
            <option value="name">Name</option>
            <option value="-reportedAt">Latest report</option>
            <option value="-updatedAt">Latest change</option>
            <option value="category">Category</option>
          </select>
        </div>
      </form>
      <ErrorText>{error}</ErrorText>
      {!data && !error && <Loading what="Loading devices" />}
      {data && (
        <>
          <table className="table" aria-label="Devices" aria-busy={stale}>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Category</th>
                <th scope="col">Last report</th>
                <th scope="col">Last change</th>
              </tr>
            </thead>
            <tbody>
              {data.map((d) => (
                <tr key={d._id}>
                  <td>
                    <Link to={`/devices/${d._id}`}>{d.name}</Link>
                  </td>
                  <td>{d.category ?? ''}</td>
                  <td>{relativeTime(d.reportedAt)}</td>
                  <td>{relativeTime(d.updatedAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {data.length === 0 && <p className="muted">No device matches.</p>}
          <nav className="pager" aria-label="Pages">
            <button type="button" disabled={page === 0} onClick={() => setPage(page - 1)}>
              Previous
            </button>
            <span>
              Page {page + 1} of {pages}
            </span>
            <button type="button" disabled={page + 1 >= pages} onClick={() => setPage(page + 1)}>
              Next
            </button>
          </nav>
        </>
      )}
    </section>
  );
}
