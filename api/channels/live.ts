import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy } from '../access.js';
import type { Principal } from '../auth/principal.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { channelDecider, channelStream } from '../../domain/channels/channel.js';
import { deviceGroupDecider, deviceGroupStream } from '../../domain/devicegroups/deviceGroup.js';

/** The name that marks a user's live channel and its device group among the user's own. */
export const LIVE_NAME = 'live data (control panel)';
/** The most devices a live channel carries; past it the devices added longest ago leave. */
export const LIVE_MAX_DEVICES = 1000;

interface Live {
  channelId: string;
  deviceGroupId: string;
  devices: string[];
}

/**
 * A user's live channel: an `mqtt` channel whose recipient is the user, on a
 * device group the user owns, so `svc/output/v2/<userId>/iotnode/<id>` carries
 * the devices a client (the control panel) shows. Any role may keep its own:
 * it exports only devices the user can read, to the user. Built from the
 * ordinary channel and device-group events, so it shows in the user's lists.
 */
export function liveChannelRoutes(deps: Deps): Router {
  const router = Router();

  /**
   * The user's live device group and its channel. They are created one after
   * the other; a group left without its channel (a crash in between) is found
   * here and completed by the next call, never duplicated.
   */
  const find = async (principal: Principal): Promise<{ groupId: string | null; channelId: string | null; devices: string[] }> => {
    const group = await deps.db
      .selectFrom('device_groups')
      .select('id')
      .where('created_by', '=', principal.id)
      .where('name', '=', LIVE_NAME)
      .orderBy('created_at')
      .orderBy('id')
      .executeTakeFirst();
    if (!group) return { groupId: null, channelId: null, devices: [] };
    const channel = await deps.db
      .selectFrom('channels')
      .select('id')
      .where('device_group', '=', group.id)
      .where('created_by', '=', principal.id)
      .where('protocol', '=', 'mqtt')
      .where(sql<boolean>`doc->'mqtt'->>'recipient' = ${principal.id}`)
      .orderBy('created_at')
      .executeTakeFirst();
    const members = await deps.db.selectFrom('device_group_members').select('device_id').where('group_id', '=', group.id).orderBy('position').execute();
    return { groupId: group.id, channelId: channel?.id ?? null, devices: members.map((m) => m.device_id) };
  };

  const present = (principal: Principal, live: Live, refused: string[] = []) => ({
    ...live,
    topic: `svc/output/v2/${principal.id}/iotnode/+`,
    refused,
  });

  router.get('/api/live-channel', async (req, res) => {
    const principal = principalOf(req);
    const live = await find(principal);
    if (!live.groupId || !live.channelId) return res.status(404).type('text/plain').send('No live channel yet');
    res.json(present(principal, { channelId: live.channelId, deviceGroupId: live.groupId, devices: live.devices }));
  });

  router.post('/api/live-channel/devices', async (req, res) => {
    const principal = principalOf(req);
    const wanted = [...new Set((req.body as { devices: string[] }).devices)];
    // Only devices the caller can read join: the channel never exports more than the user could fetch.
    const readable = wanted.length
      ? new Set((await deps.db.selectFrom('devices').select('id').where('id', 'in', wanted).where(readableBy(principal, 'devices.id')).execute()).map((r) => r.id))
      : new Set<string>();
    const refused = wanted.filter((id) => !readable.has(id));
    const context = requestContext(deps, req);
    const live = await find(principal);
    const created = !live.channelId;
    let groupId = live.groupId;
    let devices = live.devices;
    if (!groupId) {
      groupId = newResourceId();
      devices = [...readable].slice(-LIVE_MAX_DEVICES);
      await write(deps, context, deviceGroupStream(groupId), deviceGroupDecider, { type: 'CreateDeviceGroup', id: groupId, name: LIVE_NAME, devices, createdBy: principal.id, at: context.now });
    } else {
      const added = [...readable].filter((id) => !devices.includes(id));
      if (added.length) {
        devices = [...devices, ...added].slice(-LIVE_MAX_DEVICES);
        await write(deps, context, deviceGroupStream(groupId), deviceGroupDecider, { type: 'UpdateDeviceGroup', id: groupId, devices, at: context.now }, { retries: 3 });
      }
    }
    let channelId = live.channelId;
    if (!channelId) {
      channelId = newResourceId();
      const body = { name: LIVE_NAME, deviceGroup: groupId, mqtt: { type: 'keycloakUser' as const, recipient: principal.id } };
      await write(deps, context, channelStream(channelId), channelDecider, { type: 'CreateChannel', id: channelId, createdBy: principal.id, body, at: context.now });
    }
    res.status(created ? 201 : 200).json(present(principal, { channelId, deviceGroupId: groupId, devices }, refused));
  });

  return router;
}
