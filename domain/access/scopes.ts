/**
 * Access-right scopes. `admin` holds every power on the resource, including
 * granting and revoking rights on it; `write` changes it; `read` sees it;
 * `peek` is recorded and listed with the rights but opens nothing: the
 * resource stays out of its holder's lists (`readableBy`) and answers 404 to
 * it like any resource it cannot see (docs/access.md).
 */
export const SCOPES = ['admin', 'write', 'read', 'peek'] as const;
export type Scope = (typeof SCOPES)[number];

/** What a caller needs for an operation. */
export type Need = 'read' | 'write' | 'admin';

/** The scopes that give each need. */
export const GRANTS: Record<Need, readonly Scope[]> = {
  read: ['admin', 'write', 'read'],
  write: ['admin', 'write'],
  admin: ['admin'],
};

export const satisfies = (held: Iterable<string>, need: Need): boolean => {
  const set = new Set(held);
  return GRANTS[need].some((s) => set.has(s));
};

/** The rights a resource's creator receives. */
export const CREATOR_SCOPE: Scope[] = ['admin', 'write', 'read', 'peek'];
