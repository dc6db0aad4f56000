import { sql, type Expression, type Kysely, type RawBuilder, type SqlBool } from 'kysely';
import type { Database } from '../projections/database.js';
import { isUuid } from '../domain/shared/ids.js';
import type { Deps } from './deps.js';
import type { Principal } from './auth/principal.js';
import { GRANTS, satisfies, type Need } from '../domain/access/scopes.js';
import { ForbiddenError, NotFoundError, type ValidationError } from '../domain/shared/errors.js';

/**
 * The rows of `access_rights` (alias `ar`) that speak for the principal:
 * given to the user, to a usergroup the user is a member of, or to an
 * organization unit the user belongs to (named in `attributes.organization`)
 * or any unit above one of those in the tree. The units are found through the
 * `organization_tree` closure, one index lookup per unit the user names, in a
 * subquery that does not depend on the row, so PostgreSQL computes it once
 * per query however many rights it filters.
 */
function heldBy(principal: Principal): RawBuilder<SqlBool> {
  return sql<SqlBool>`((ar.subject_type = 'user' AND ar.subject_id = ${principal.id})
    OR (ar.subject_type = 'group' AND ar.subject_id IN (SELECT group_id FROM usergroup_members WHERE user_id = ${principal.id}::uuid))
    OR (ar.subject_type = 'orgUnit' AND ar.subject_id IN (
      SELECT coalesce(t.ancestor_name, n.name)
      FROM users u
        CROSS JOIN LATERAL jsonb_array_elements_text(CASE WHEN jsonb_typeof(u.profile->'attributes'->'organization') = 'array' THEN u.profile->'attributes'->'organization' ELSE '[]'::jsonb END) AS n(name)
        LEFT JOIN organization_tree t ON t.unit_name = n.name
      WHERE u.id = ${principal.id}::uuid)))`;
}

/** Every scope the principal holds on a resource, directly, through its usergroups or its organization units. */
export async function scopesOn(deps: Deps, principal: Principal, resourceId: string): Promise<Set<string>> {
  const { rows } = await sql<{ scope: string[] }>`
    SELECT ar.scope FROM access_rights ar WHERE ar.resource_id = ${resourceId} AND ${heldBy(principal)}`.execute(deps.db);
  return new Set(rows.flatMap((r) => r.scope));
}

/**
 * The scopes a user holds on each of `resourceIds`, by the same rule as a
 * request's: for work done on a user's behalf outside a request (a
 * calculation runs with its owner's rights). A resource without any is absent.
 */
export async function scopesOfUser(db: Kysely<Database>, userId: string, resourceIds: string[]): Promise<Map<string, Set<string>>> {
  const held = new Map<string, Set<string>>();
  if (resourceIds.length === 0 || !isUuid(userId)) return held;
  const { rows } = await sql<{ resource_id: string; scope: string[] }>`
    SELECT ar.resource_id, ar.scope FROM access_rights ar
    WHERE ar.resource_id = ANY(${resourceIds}::text[]) AND ${heldBy({ id: userId, username: '', roles: [] })}`.execute(db);
  for (const r of rows) held.set(r.resource_id, new Set([...(held.get(r.resource_id) ?? []), ...r.scope]));
  return held;
}

/**
 * The object check. A resource the caller cannot read is reported as missing
 * (404), so its existence does not leak; one readable but not enough for
 * `need` is 403.
 */
export async function requireAccess(deps: Deps, principal: Principal, resourceId: string, need: Need, notFound = 'Not Found'): Promise<Set<string>> {
  const held = await scopesOn(deps, principal, resourceId);
  if (!satisfies(held, 'read')) throw new NotFoundError(notFound);
  if (!satisfies(held, need)) throw new ForbiddenError();
  return held;
}

/**
 * A SQL condition: `column` (a resource id column) is readable by the principal.
 * Use it in list queries so access filtering happens in the database.
 */
export function readableBy(principal: Principal, column: string): Expression<SqlBool> {
  return held(principal, column, 'read');
}

/** A SQL condition: `column` (a resource id column) is writable by the principal (`write` or `admin`). */
export function writableBy(principal: Principal, column: string): Expression<SqlBool> {
  return held(principal, column, 'write');
}

function held(principal: Principal, column: string, need: Need): Expression<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM access_rights ar
    WHERE ar.resource_id = ${sql.ref(column)}
      AND ar.scope && ${sql.raw(`ARRAY[${GRANTS[need].map((s) => `'${s}'`).join(', ')}]`)}::text[]
      AND ${heldBy(principal)})`;
}

/**
 * The object check for an id named in a request body (a credentials set a
 * topic is reserved for, a channel's recipient). A reference the caller
 * cannot read answers exactly as one that does not exist, with the same 422,
 * so a body can never be used to learn whether someone else's resource
 * exists; one readable but not enough for `need` is 403.
 */
export async function requireReference(deps: Deps, principal: Principal, resourceId: unknown, need: Need, missing: ValidationError): Promise<Set<string>> {
  if (typeof resourceId !== 'string') throw missing;
  const held = await scopesOn(deps, principal, resourceId);
  if (!satisfies(held, 'read')) throw missing;
  if (!satisfies(held, need)) throw new ForbiddenError();
  return held;
}
