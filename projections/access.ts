import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import type { RecordedEvent } from '../domain/shared/events.js';
import { isBuiltinRole, type Permissions } from '../domain/access/roles.js';
import { OWNED_RESOURCES } from '../domain/access/resources.js';
import { CREATOR_SCOPE } from '../domain/access/scopes.js';
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
          for (const g of grants ?? []) await upsertRight(tx, { resource_type: 'device', resource_id: id, subject_type: g.subjectType, subject_id: g.subjectId, scope: g.scope });
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
