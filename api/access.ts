import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from './deps.js';
import type { Principal } from './auth/principal.js';
import { satisfies, type Need } from '../domain/access/scopes.js';
import { ForbiddenError, NotFoundError } from '../domain/shared/errors.js';

/** Every scope the principal holds on a resource, directly or through its usergroups. */
export async function scopesOn(deps: Deps, principal: Principal, resourceId: string): Promise<Set<string>> {
  const { rows } = await sql<{ scope: string[] }>`
    SELECT scope FROM access_rights
    WHERE resource_id = ${resourceId}
      AND ((subject_type = 'user' AND subject_id = ${principal.id})
        OR (subject_type = 'group' AND subject_id IN (SELECT group_id FROM usergroup_members WHERE user_id = ${principal.id}::uuid)))`.execute(deps.db);
  return new Set(rows.flatMap((r) => r.scope));
}

/**
 * The object check. A resource the caller cannot read is reported as missing
 * (404), so its existence does not leak; one readable but not enough for
 * `need` is 403.
 */
export async function requireAccess(deps: Deps, principal: Principal, resourceId: string, need: Need, notFound = 'Not Found'): Promise<void> {
  const held = await scopesOn(deps, principal, resourceId);
  if (!satisfies(held, 'read')) throw new NotFoundError(notFound);
  if (!satisfies(held, need)) throw new ForbiddenError();
}

/**
 * A SQL condition: `column` (a resource id column) is readable by the principal.
 * Use it in list queries so access filtering happens in the database.
 */
export function readableBy(principal: Principal, column: string): Expression<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM access_rights ar
    WHERE ar.resource_id = ${sql.ref(column)}
      AND ar.scope && ARRAY['admin', 'write', 'read']::text[]
      AND ((ar.subject_type = 'user' AND ar.subject_id = ${principal.id})
        OR (ar.subject_type = 'group' AND ar.subject_id IN (SELECT group_id FROM usergroup_members WHERE user_id = ${principal.id}::uuid))))`;
}
