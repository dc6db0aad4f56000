import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from '../deps.js';
import type { Principal } from '../../domain/access/principal.js';
import { readableBy, requireAccess } from '../access.js';
import type { Need } from '../../domain/access/scopes.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import { APP_NOT_FOUND } from '../../domain/apps/app.js';

/**
 * The app filters of the principal's usergroups let `column` (an app id)
 * through: every group of theirs that has a filter lists it. A group without
 * a filter restricts nothing; a member of two filtered groups sees only the
 * apps both allow.
 */
export function allowedByFilters(principal: Principal, column: string): Expression<SqlBool> {
  return sql<SqlBool>`NOT EXISTS (SELECT 1 FROM usergroup_members m JOIN usergroups g ON g.id = m.group_id
    WHERE m.user_id = ${principal.id}::uuid AND g.app_filter IS NOT NULL AND NOT (${sql.ref(column)} = ANY(g.app_filter)))`;
}

/** An app the principal may see: readable through access rights and let through by its groups' app filters. */
export function appVisibleTo(principal: Principal, column: string): Expression<SqlBool> {
  return sql<SqlBool>`(${readableBy(principal, column)} AND ${allowedByFilters(principal, column)})`;
}

/**
 * The object check for an app: an app the caller cannot see, for want of
 * rights or because an app filter hides it, is reported missing (404); one
 * visible but short of `need` is 403.
 */
export async function requireApp(deps: Deps, principal: Principal, id: string, need: Need): Promise<void> {
  await requireAccess(deps, principal, id, need, APP_NOT_FOUND);
  const row = await deps.db.selectFrom('apps').select('id').where('id', '=', id).where(allowedByFilters(principal, 'apps.id')).executeTakeFirst();
  if (!row) throw new NotFoundError(APP_NOT_FOUND);
}
