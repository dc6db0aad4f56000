import { sql, type Expression, type Kysely, type RawBuilder, type SqlBool, type Transaction } from 'kysely';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import type { RecordedEvent } from '../domain/shared/events.js';
import { isBuiltinRole, type Permissions } from '../domain/access/roles.js';
import { OWNED_RESOURCES } from '../domain/access/resources.js';
import { CREATOR_SCOPE, GRANTS, type Need } from '../domain/access/scopes.js';
import { isUuid } from '../domain/shared/ids.js';
import type { AccessEvent } from '../domain/access/rights.js';
import type { RoleEvent } from '../domain/access/customRoles.js';
import type { DeviceEvent } from '../domain/devices/device.js';

export interface AccessRightsTable {
  resource_type: string;
  resource_id: string;
  subject_type: 'user' | 'group' | 'orgUnit';
  subject_id: string;
  scope: string[];
}

export interface RolesTable {
  name: string;
  permissions: Permissions;
  revision: number;
}

export interface AccessTables {
  access_rights: AccessRightsTable;
  roles: RolesTable;
}

/** The permissions of the custom roles among `roles`. */
export async function loadCustomRoles(db: Kysely<Database>, roles: string[]): Promise<Map<string, Permissions>> {
  const custom = roles.filter((r) => !isBuiltinRole(r));
  const map = new Map<string, Permissions>();
  if (custom.length === 0) return map;
  const rows = await db.selectFrom('roles').select(['name', 'permissions']).where('name', 'in', custom).execute();
  for (const row of rows) map.set(row.name, row.permissions);
  return map;
}

const CREATED = new Map(OWNED_RESOURCES.map((r) => [r.created, r.resourceType]));
const DELETED = new Map(OWNED_RESOURCES.map((r) => [r.deleted, r.resourceType]));

/**
 * Access rights (grants, revokes, the creator rule, clean-up on deletion) and
 * custom roles. Every handler sets or removes rows in global order, so
 * applying a batch again ends in the same rows.
 */
export const accessProjection: Projection = {
  name: 'access',
  tables: ['access_rights', 'roles'],
  async apply(tx, batch) {
    for (const event of batch) {
      const created = CREATED.get(event.type);
      if (created) {
        const data = event.data as { id?: unknown; createdBy?: unknown };
        // Created by a component rather than a user (no `createdBy`): nobody gets creator rights.
        if (typeof data.id !== 'string' || typeof data.createdBy !== 'string') continue;
        await upsertRight(tx, { resource_type: created, resource_id: data.id, subject_type: 'user', subject_id: data.createdBy, scope: [...CREATOR_SCOPE] });
        continue;
      }
      const deleted = DELETED.get(event.type);
      if (deleted) {
        const { id } = event.data as { id: string };
        await tx.deleteFrom('access_rights').where('resource_id', '=', id).execute();
        // A deleted group's rights go with it; so do a deleted organization unit's, given to its name.
        if (deleted === 'usergroup') await tx.deleteFrom('access_rights').where('subject_type', '=', 'group').where('subject_id', '=', id).execute();
        if (deleted === 'organization') await tx.deleteFrom('access_rights').where('subject_type', '=', 'orgUnit').where('subject_id', '=', (event.data as { name: string }).name).execute();
        continue;
      }
      switch (event.type) {
        case 'AccessGranted':
        case 'AccessRevoked':
          await applyAccessEvent(tx, event as RecordedEvent & AccessEvent);
          break;
        case 'RoleCreated':
        case 'RoleReplaced':
        case 'RoleDeleted':
          await applyRoleEvent(tx, event as RecordedEvent & RoleEvent);
          break;
        case 'DeviceClaimed': {
          // The rights a claim gives ride on the claim itself, so a claim and its rights are stored together or not at all.
          const { id, grants } = (event as RecordedEvent & DeviceEvent & { type: 'DeviceClaimed' }).data;
          for (const g of grants) await upsertRight(tx, { resource_type: 'device', resource_id: id, subject_type: g.subjectType, subject_id: g.subjectId, scope: g.scope });
          break;
        }
        case 'UserDeleted': {
          const { id } = event.data as { id: string };
          await tx.deleteFrom('access_rights').where('subject_type', '=', 'user').where('subject_id', '=', id).execute();
          break;
        }
      }
    }
  },
};

async function upsertRight(tx: Transaction<Database>, row: AccessRightsTable): Promise<void> {
  await tx
    .insertInto('access_rights')
    .values(row)
    .onConflict((oc) => oc.columns(['resource_id', 'subject_type', 'subject_id']).doUpdateSet({ scope: row.scope, resource_type: row.resource_type }))
    .execute();
}

async function applyAccessEvent(tx: Transaction<Database>, event: RecordedEvent & AccessEvent): Promise<void> {
  const d = event.data;
  if (event.type === 'AccessGranted') {
    await upsertRight(tx, { resource_type: d.resourceType, resource_id: d.resourceId, subject_type: d.subjectType, subject_id: d.subjectId, scope: d.scope });
    return;
  }
  const subject = sql`resource_id = ${d.resourceId} AND subject_type = ${d.subjectType} AND subject_id = ${d.subjectId}`;
  await sql`UPDATE access_rights SET scope = ARRAY(SELECT s FROM unnest(scope) s WHERE NOT s = ANY(${d.scope}::text[])) WHERE ${subject}`.execute(tx);
  await sql`DELETE FROM access_rights WHERE ${subject} AND cardinality(scope) = 0`.execute(tx);
}

async function applyRoleEvent(tx: Transaction<Database>, event: RecordedEvent & RoleEvent): Promise<void> {
  if (event.type === 'RoleDeleted') {
    await tx.deleteFrom('roles').where('name', '=', event.data.name).where('revision', '<', event.revision).execute();
    return;
  }
  const permissions = JSON.stringify(event.data.permissions) as unknown as Permissions;
  await tx
    .insertInto('roles')
    .values({ name: event.data.name, permissions, revision: event.revision })
    .onConflict((oc) => oc.column('name').doUpdateSet({ permissions, revision: event.revision }).where('roles.revision', '<', event.revision))
    .execute();
}

// ---- reading rights: what a user holds, for requests and for reactors acting on a user's behalf ----

/** Whom rights are held by: a user, by id. */
export interface Holder {
  id: string;
}

/**
 * The rows of `access_rights` (alias `ar`) that speak for the principal:
 * given to the user, to a usergroup the user is a member of, or to an
 * organization unit the user belongs to (named in `attributes.organization`)
 * or any unit above one of those in the tree. The units are found through the
 * `organization_tree` closure, one index lookup per unit the user names, in a
 * subquery that does not depend on the row, so PostgreSQL computes it once
 * per query however many rights it filters.
 */
function heldBy(principal: Holder): RawBuilder<SqlBool> {
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
export async function scopesHeld(db: Kysely<Database>, principal: Holder, resourceId: string): Promise<Set<string>> {
  const { rows } = await sql<{ scope: string[] }>`
    SELECT ar.scope FROM access_rights ar WHERE ar.resource_id = ${resourceId} AND ${heldBy(principal)}`.execute(db);
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
    WHERE ar.resource_id = ANY(${resourceIds}::text[]) AND ${heldBy({ id: userId })}`.execute(db);
  for (const r of rows) held.set(r.resource_id, new Set([...(held.get(r.resource_id) ?? []), ...r.scope]));
  return held;
}

/**
 * A SQL condition: `column` (a resource id column) is readable by the principal.
 * Use it in list queries so access filtering happens in the database.
 */
export function readableBy(principal: Holder, column: string): Expression<SqlBool> {
  return held(principal, column, 'read');
}

/** A SQL condition: `column` (a resource id column) is writable by the principal (`write` or `admin`). */
export function writableBy(principal: Holder, column: string): Expression<SqlBool> {
  return held(principal, column, 'write');
}

function held(principal: Holder, column: string, need: Need): Expression<SqlBool> {
  return sql<SqlBool>`EXISTS (SELECT 1 FROM access_rights ar
    WHERE ar.resource_id = ${sql.ref(column)}
      AND ar.scope && ${sql.raw(`ARRAY[${GRANTS[need].map((s) => `'${s}'`).join(', ')}]`)}::text[]
      AND ${heldBy(principal)})`;
}
