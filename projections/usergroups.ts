import { sql, type RawBuilder, type Transaction } from 'kysely';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { UsergroupEvent } from '../domain/usergroups/usergroup.js';

export interface UsergroupsTable {
  id: string;
  name: string;
  owner: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
  /** The apps the members may see; null when the group has no filter. */
  app_filter: string[] | null;
}

export interface UsergroupMembersTable {
  group_id: string;
  user_id: string;
}

export interface UsergroupsTables {
  usergroups: UsergroupsTable;
  usergroup_members: UsergroupMembersTable;
}

const EVENTS = new Set([
  'UsergroupCreated',
  'UsergroupUpdated',
  'UsergroupMemberAdded',
  'UsergroupMemberRemoved',
  'UsergroupAppFilterSet',
  'UsergroupAppAllowed',
  'UsergroupAppDisallowed',
  'UsergroupAppFilterRemoved',
  'UsergroupDeleted',
]);

/**
 * Usergroups, their members and app filters. Group rows (with the filter) are
 * guarded by stream revision; member rows are set or removed, and only while
 * both the group and the user exist, so applying a batch again ends in the
 * same rows. A deleted app leaves every filter.
 */
export const usergroupsProjection: Projection = {
  name: 'usergroups',
  tables: ['usergroup_members', 'usergroups'],
  // A member is added only when the user exists.
  reads: ['users'],
  async apply(tx, batch) {
    for (const event of batch) {
      if (event.type === 'UserDeleted') {
        await tx.deleteFrom('usergroup_members').where('user_id', '=', (event.data as { id: string }).id).execute();
        continue;
      }
      if (event.type === 'AppDeleted') {
        const appId = (event.data as { id: string }).id;
        await sql`UPDATE usergroups SET app_filter = array_remove(app_filter, ${appId}) WHERE ${appId} = ANY(app_filter)`.execute(tx);
        continue;
      }
      if (EVENTS.has(event.type)) await applyEvent(tx, event as RecordedEvent & UsergroupEvent);
    }
  },
};

async function applyEvent(tx: Transaction<Database>, event: RecordedEvent & UsergroupEvent): Promise<void> {
  const id = event.data.id;
  const at = new Date(event.data.at);
  switch (event.type) {
    case 'UsergroupCreated':
      await tx
        .insertInto('usergroups')
        .values({ id, name: event.data.name, owner: event.data.owner, revision: event.revision, created_at: at, updated_at: at })
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      return;
    case 'UsergroupUpdated':
      await tx
        .updateTable('usergroups')
        .set({ ...event.data.changes, revision: event.revision, updated_at: at })
        .where('id', '=', id)
        .where('revision', '<', event.revision)
        .execute();
      return;
    case 'UsergroupMemberAdded':
      await sql`INSERT INTO usergroup_members (group_id, user_id)
        SELECT ${id}, ${event.data.userId}::uuid
        WHERE EXISTS (SELECT 1 FROM usergroups WHERE id = ${id}) AND EXISTS (SELECT 1 FROM users WHERE id = ${event.data.userId}::uuid)
        ON CONFLICT DO NOTHING`.execute(tx);
      return;
    case 'UsergroupMemberRemoved':
      await tx.deleteFrom('usergroup_members').where('group_id', '=', id).where('user_id', '=', event.data.userId).execute();
      return;
    case 'UsergroupAppFilterSet':
      await setFilter(tx, event, sql`${event.data.appIds}::text[]`);
      return;
    case 'UsergroupAppAllowed':
      await setFilter(tx, event, sql`array_append(array_remove(coalesce(app_filter, '{}'), ${event.data.appId}), ${event.data.appId})`);
      return;
    case 'UsergroupAppDisallowed':
      await setFilter(tx, event, sql`array_remove(app_filter, ${event.data.appId})`);
      return;
    case 'UsergroupAppFilterRemoved':
      await setFilter(tx, event, sql`NULL`);
      return;
    case 'UsergroupDeleted':
      await tx.deleteFrom('usergroups').where('id', '=', id).execute();
      return;
    default: {
      const _: never = event;
      return _;
    }
  }
}

async function setFilter(tx: Transaction<Database>, event: RecordedEvent & UsergroupEvent, value: RawBuilder<unknown>): Promise<void> {
  await sql`UPDATE usergroups SET app_filter = ${value}, revision = ${event.revision}, updated_at = ${new Date(event.data.at)}
    WHERE id = ${event.data.id} AND revision < ${event.revision}`.execute(tx);
}
