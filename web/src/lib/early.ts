/**
 * A dashboard opened by its address starts loading at once, beside the
 * session's own start: its page and widget code, and its data with the stored
 * token. The page takes the data if it is still fresh; a failed early read is
 * simply read again the ordinary way.
 */
import { session } from './session';

const TOKEN_KEY = 'panel.token';
/** A dashboard read early: its body, and its `ETag` (the revision a change is made against). */
export interface EarlyRead {
  body: unknown;
  etag: string | null;
}

let early: { id: string; data: Promise<EarlyRead> } | null = null;

export function startEarly(): void {
  const m = /^\/dashboards\/([0-9a-f]{24})$/.exec(location.pathname);
  if (!m) return;
  void import('../pages/Dashboard');
  for (const load of [() => import('../widgets/values'), () => import('../widgets/charts'), () => import('../widgets/misc')]) void load();
  const token = localStorage.getItem(TOKEN_KEY);
  if (!token) return;
  const data = fetch(`/api/dashboards/${m[1]}`, { headers: { authorization: `Bearer ${token}`, accept: 'application/json' } }).then((r) =>
    r.ok ? r.json().then((body: unknown) => ({ body, etag: r.headers.get('etag') })) : Promise.reject(new Error(String(r.status))),
  );
  data.catch(() => {});
  early = { id: m[1]!, data };
}

// A read made with the token of a user who logged out is never handed to the next one.
session.subscribe(() => {
  if (!session.get()) early = null;
});

/** The early read of this dashboard, once; null when there is none. */
export function takeEarly(id: string): Promise<EarlyRead> | null {
  if (!early || early.id !== id) return null;
  const { data } = early;
  early = null;
  return data;
}
