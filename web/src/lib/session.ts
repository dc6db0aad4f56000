import { api, ApiError, setApiHooks } from './api';
import { createStore } from './store';

export interface User {
  id: string;
  username: string;
  firstName?: string;
  lastName?: string;
  email?: string;
  enabled?: boolean;
  requiredActions?: string[];
  attributes?: { roles?: string[]; organization?: string[]; globalVisibility?: string; language?: string };
}

interface Role {
  name: string;
  builtin: boolean;
  permissions: Record<string, string[]>;
}

export interface Session {
  token: string;
  user: User;
  /** Resource type → the HTTP methods the user's roles allow (the API's role check, known ahead). */
  permissions: Record<string, string[]>;
}

const KEY = 'panel.token';

/** The logged-in user, or null; `expired` is set while a call waits for the user to log in again. */
export const session = createStore<Session | null>(null);
export const expired = createStore<boolean>(false);

/** The user id a token speaks for: its `sub` claim (read, not verified; the platform verifies it). */
export function subjectOf(token: string): string | null {
  try {
    const payload = JSON.parse(atob(token.split('.')[1]!.replace(/-/g, '+').replace(/_/g, '/'))) as { sub?: unknown };
    return typeof payload.sub === 'string' ? payload.sub : null;
  } catch {
    return null;
  }
}

let waiting: { resolve: (t: string) => void; reject: (e: Error) => void; promise: Promise<string> } | null = null;

setApiHooks({
  token: () => session.get()?.token ?? null,
  relogin() {
    if (!waiting) {
      let resolve!: (t: string) => void;
      let reject!: (e: Error) => void;
      const promise = new Promise<string>((res, rej) => {
        resolve = res;
        reject = rej;
      });
      waiting = { resolve, reject, promise };
      expired.set(true);
    }
    return waiting.promise;
  },
});

async function load(token: string): Promise<Session> {
  const id = subjectOf(token);
  if (!id) throw new ApiError(401, 'The token names no user');
  const headers = { authorization: `Bearer ${token}` };
  const [user, roles] = await Promise.all([
    api<User>('GET', `/api/users/${id}`, { anonymous: true, headers }),
    // A custom role may not list roles: then nothing is offered that the role check could refuse.
    api<Role[]>('GET', '/api/roles', { anonymous: true, headers }).catch((e: unknown) => {
      if (e instanceof ApiError && e.status === 403) return [];
      throw e;
    }),
  ]);
  const mine = user.attributes?.roles?.length ? user.attributes.roles : ['viewerBasic'];
  const permissions: Record<string, string[]> = {};
  for (const role of roles.filter((r) => mine.includes(r.name))) {
    for (const [resource, methods] of Object.entries(role.permissions)) permissions[resource] = [...new Set([...(permissions[resource] ?? []), ...methods])];
  }
  return { token, user, permissions };
}

export async function logIn(username: string, password: string): Promise<Session> {
  const { token } = await api<{ token: string }>('POST', '/api/auth/local', { anonymous: true, body: { username, password } });
  const next = await load(token);
  const previous = session.get();
  localStorage.setItem(KEY, token);
  session.set(next);
  if (waiting) {
    const w = waiting;
    waiting = null;
    expired.set(false);
    // Another user took over: what the page holds belongs to the previous one.
    if (previous && previous.user.id !== next.user.id) {
      location.reload();
      return next;
    }
    w.resolve(token);
  }
  return next;
}

/**
 * Ends the session in this tab, and through the stored token in every other
 * tab of the panel. What the page holds in memory for the user (the device
 * cache, the live connection and the events it saw) is dropped as the session
 * goes, so a next user in this tab reads everything afresh with their own token.
 */
export function logOut(): void {
  localStorage.removeItem(KEY);
  if (waiting) {
    waiting.reject(new ApiError(401, 'Logged out'));
    waiting = null;
    expired.set(false);
  }
  session.set(null);
}

/**
 * Another tab of the panel changed the stored token. Removed: that tab logged
 * out, and so does this one. Another user's: what this tab holds belonged to
 * the previous user, so it starts again as the new one. The same user's new
 * token (a login over an expired one): this tab takes it, and a call waiting
 * for a login here goes on with it.
 */
function onStoredToken(token: string | null): void {
  const current = session.get();
  if (!current) return;
  if (!token) return logOut();
  if (token === current.token) return;
  if (subjectOf(token) !== current.user.id) return location.reload();
  session.set({ ...current, token });
  if (waiting) {
    const w = waiting;
    waiting = null;
    expired.set(false);
    w.resolve(token);
  }
}
window.addEventListener('storage', (e) => {
  // A null key: the whole storage was cleared.
  if (e.storageArea === localStorage && (e.key === KEY || e.key === null)) onStoredToken(localStorage.getItem(KEY));
});

/**
 * A stored token is used at once, before its user and roles are read: the
 * page starts loading its data in parallel. Until `restore` finishes, no
 * permission is known, so no action the role check could refuse is offered.
 */
export function provisional(): boolean {
  const token = localStorage.getItem(KEY);
  const id = token && subjectOf(token);
  if (!token || !id) return false;
  session.set({ token, user: { id, username: '' }, permissions: {} });
  return true;
}

/** Restores the session of a stored token; a token that no longer works is dropped (back to the login page). */
export async function restore(): Promise<void> {
  const token = localStorage.getItem(KEY);
  if (!token) return;
  try {
    const restored = await load(token);
    // A login in the meantime (over an expired token) wins.
    if (session.get()?.token === token) session.set(restored);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 404)) {
      if (session.get()?.token === token) logOut();
      else localStorage.removeItem(KEY);
    } else throw error;
  }
}

/**
 * Takes the fresh token the platform answered for the same user (setting one's
 * password ends every token issued before it): kept for later visits and used
 * from the next call on, and by the live connection when it reconnects.
 */
export async function renewToken(token: string): Promise<void> {
  const s = session.get();
  if (!s || subjectOf(token) !== s.user.id) return;
  localStorage.setItem(KEY, token);
  session.set({ ...s, token });
  session.set(await load(token));
}

/** Whether the user's roles allow `method` on `resource` (the API's role check). */
export function can(resource: string, method: string): boolean {
  return session.get()?.permissions[resource]?.includes(method) ?? false;
}

export const mustChangePassword = (s: Session | null) => !!s?.user.requiredActions?.includes('UPDATE_PASSWORD');
