import { sql } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { ChannelDoc, ChannelEvent, ChannelSecrets } from '../domain/channels/channel.js';
import type { DeviceGroupEvent } from '../domain/devicegroups/deviceGroup.js';
import type { Projection } from './runner.js';

export interface ChannelsTable {
  id: string;
  doc: ChannelDoc;
  secrets: ChannelSecrets;
  iotnode: string | null;
  device_group: string | null;
  protocol: string;
  created_by: string;
  created_at: Date;
}

export interface DeviceGroupsTable {
  id: string;
  name: string;
  revision: number;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface DeviceGroupMembersTable {
  group_id: string;
  device_id: string;
  position: number;
}

export interface ChannelsTables {
  channels: ChannelsTable;
  device_groups: DeviceGroupsTable;
  device_group_members: DeviceGroupMembersTable;
}

/** Channels and device groups. */
export const channelsProjection: Projection = {
  name: 'channels',
  tables: ['channels', 'device_group_members', 'device_groups'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & (ChannelEvent | DeviceGroupEvent))[]) {
      switch (e.type) {
        case 'ChannelCreated':
          await sql`INSERT INTO channels (id, doc, secrets, iotnode, device_group, protocol, created_by, created_at)
            VALUES (${e.data.id}, ${JSON.stringify(e.data.doc)}::jsonb, ${JSON.stringify(e.data.secrets)}::jsonb, ${e.data.doc.iotnode ?? null},
              ${e.data.doc.deviceGroup ?? null}, ${e.data.protocol}, ${e.data.createdBy}, ${e.data.at})
            ON CONFLICT (id) DO NOTHING`.execute(tx);
          break;
        case 'ChannelReplaced':
          // The whole of what may change, from the event alone: applied twice, it writes the same.
          await sql`UPDATE channels SET doc = ${JSON.stringify(e.data.doc)}::jsonb, secrets = ${JSON.stringify(e.data.secrets)}::jsonb WHERE id = ${e.data.id}`.execute(tx);
          break;
        case 'ChannelDeleted':
          await tx.deleteFrom('channels').where('id', '=', e.data.id).execute();
          break;
        case 'DeviceGroupCreated':
          await tx
            .insertInto('device_groups')
            .values({ id: e.data.id, name: e.data.name, revision: e.revision, created_by: e.data.createdBy, created_at: new Date(e.data.at), updated_at: new Date(e.data.at) })
            .onConflict((oc) => oc.column('id').doNothing())
            .execute();
          await setMembers(tx, e.data.id, e.data.devices);
          break;
        case 'DeviceGroupUpdated': {
          const updated = await tx
            .updateTable('device_groups')
            .set({ revision: e.revision, updated_at: new Date(e.data.at), ...(e.data.name !== undefined ? { name: e.data.name } : {}) })
            .where('id', '=', e.data.id)
            .where('revision', '<', e.revision)
            .executeTakeFirst();
          if (Number(updated.numUpdatedRows) > 0 && e.data.devices) await setMembers(tx, e.data.id, e.data.devices);
          break;
        }
        case 'DeviceGroupDeleted':
          await tx.deleteFrom('device_groups').where('id', '=', e.data.id).execute();
          break;
      }
    }
  },
};

async function setMembers(tx: Parameters<Projection['apply']>[0], groupId: string, devices: string[]): Promise<void> {
  await tx.deleteFrom('device_group_members').where('group_id', '=', groupId).execute();
  if (devices.length === 0) return;
  await tx
    .insertInto('device_group_members')
    .values(devices.map((device_id, position) => ({ group_id: groupId, device_id, position })))
    .onConflict((oc) => oc.doNothing())
    .execute();
}
