import { REDACTED, isSecretKey, redact } from './redact.js';

/**
 * One value that changed, named by its JSON Pointer (RFC 6901) in the
 * resource as its revisions show it. Array elements that carry an id
 * (`_id` or `id`) are named by it rather than by their index, so a change
 * to one widget reads `/widgets/<widgetId>/settings/title` however the list
 * moved. `before` is absent for a value added, `after` for one removed.
 */
export interface Change {
  path: string;
  before?: unknown;
  after?: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const escape = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

function equal(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => equal(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && equal(a[k], b[k]));
  }
  return false;
}

/** The key that names every element of both lists uniquely, if there is one. */
function idKey(a: unknown[], b: unknown[]): '_id' | 'id' | null {
  for (const key of ['_id', 'id'] as const) {
    const ids = [...a, ...b].map((x) => (isObject(x) && typeof x[key] === 'string' ? (x[key] as string) : null));
    if (ids.some((id) => id === null)) continue;
    if (new Set(a.map((x) => (x as Record<string, string>)[key])).size === a.length && new Set(b.map((x) => (x as Record<string, string>)[key])).size === b.length) return key;
  }
  return null;
}

function walk(before: unknown, after: unknown, path: string, out: Change[]): void {
  if (equal(before, after)) return;
  if (before === undefined) {
    out.push({ path, after });
    return;
  }
  if (after === undefined) {
    out.push({ path, before });
    return;
  }
  if (isObject(before) && isObject(after)) {
    for (const key of Object.keys(before)) walk(before[key], after[key], `${path}/${escape(key)}`, out);
    for (const key of Object.keys(after)) if (!Object.hasOwn(before, key)) walk(undefined, after[key], `${path}/${escape(key)}`, out);
    return;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    const key = idKey(before, after);
    if (key) {
      const old = new Map(before.map((x) => [(x as Record<string, string>)[key]!, x]));
      const now = new Map(after.map((x) => [(x as Record<string, string>)[key]!, x]));
      for (const [id, x] of old) walk(x, now.get(id), `${path}/${escape(id)}`, out);
      for (const [id, x] of now) if (!old.has(id)) walk(undefined, x, `${path}/${escape(id)}`, out);
      return;
    }
  }
  out.push({ path, before, after });
}

/**
 * What changed from `before` to `after` (either undefined for a resource
 * that did not exist), redacted: a value under a secret's key shows as
 * `[redacted]`, as in the audit log.
 */
export function diff(before: unknown, after: unknown): Change[] {
  const out: Change[] = [];
  walk(before ?? {}, after ?? {}, '', out);
  return out.map((c) => {
    const secret = c.path.split('/').some((segment) => isSecretKey(segment.replace(/~1/g, '/').replace(/~0/g, '~')));
    const shown: Change = { path: c.path };
    if ('before' in c) shown.before = secret ? REDACTED : redact(c.before);
    if ('after' in c) shown.after = secret ? REDACTED : redact(c.after);
    return shown;
  });
}
