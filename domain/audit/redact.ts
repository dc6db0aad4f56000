/**
 * Redaction: what the audit log and revisions never show. This is the one
 * place that decides it; every event and every change leaves the server
 * through `redact`.
 *
 * - Values under these keys, at any depth, are replaced whole: password
 *   hashes (users, credentials sets), webhook and app secrets and their hashes, API
 *   tokens, keys and client secrets, passwords, `Authorization` headers.
 * - Under `secrets` (a connector's write-only settings, broker password and
 *   webhook secret hash; an http channel's write-only `Authorization`
 *   header) every value is replaced and the keys stay, so the log still shows
 *   that a secret was set and which.
 *
 * Keys compare without regard to case.
 */
export const REDACTED = '[redacted]';

export const SECRET_KEYS: ReadonlySet<string> = new Set(
  ['passwordHash', 'password', 'mqttPassword', 'webhookSecret', 'webhookSecretHash', 'secretHash', 'apiToken', 'apiKey', 'token', 'accessToken', 'refreshToken', 'clientSecret', 'privateKey', 'authorization'].map((k) => k.toLowerCase()),
);
export const SECRET_CONTAINERS: ReadonlySet<string> = new Set(['secrets']);

export const isSecretKey = (key: string): boolean => SECRET_KEYS.has(key.toLowerCase()) || SECRET_CONTAINERS.has(key.toLowerCase());

/** Every leaf replaced, keys kept. */
function blank(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(blank);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, blank(v)]));
  return REDACTED;
}

/** The value with every secret replaced; returns the same object when it holds none. */
export function redact<T>(value: T): T {
  if (Array.isArray(value)) {
    let changed = false;
    const out = value.map((v) => {
      const r = redact(v);
      if (r !== v) changed = true;
      return r;
    });
    return (changed ? out : value) as T;
  }
  if (value === null || typeof value !== 'object') return value;
  let out: Record<string, unknown> | null = null;
  for (const [key, v] of Object.entries(value)) {
    const lower = key.toLowerCase();
    const r = SECRET_CONTAINERS.has(lower) ? blank(v) : SECRET_KEYS.has(lower) ? REDACTED : redact(v);
    if (r !== v) {
      out ??= { ...(value as Record<string, unknown>) };
      out[key] = r;
    }
  }
  return (out ?? value) as T;
}
