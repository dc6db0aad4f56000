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

  const find = async (principal: Principal): Promise<Live | null> => {
    const row = await deps.db
      .selectFrom('channels')
      .innerJoin('device_groups', 'device_groups.id', 'channels.device_group')
      .select(['channels.id as channelId', 'device_groups.id as deviceGroupId'])
      .where('channels.created_by', '=', principal.id)
      .where('device_groups.created_by', '=', principal.id)
      .where('channels.protocol', '=', 'mqtt')
      .where(sql<boolean>`channels.doc->>'name' = ${LIVE_NAME} AND channels.doc->'mqtt'->>'recipient' = ${principal.id}`)
      .orderBy('channels.created_at')
      .executeTakeFirst();
    if (!row) return null;
    const members = await deps.db.selectFrom('device_group_members').select('device_id').where('group_id', '=', row.deviceGroupId).orderBy('position').execute();
    return { ...row, devices: members.map((m) => m.device_id) };
  };

  const present = (principal: Principal, live: Live, refused: string[] = []) => ({
    ...live,
    topic: `svc/output/v2/${principal.id}/iotnode/+`,
    refused,
  });

  router.get('/api/live-channel', async (req, res) => {
    const principal = principalOf(req);
    const live = await find(principal);
    if (!live) return res.status(404).type('text/plain').send('No live channel yet');
    res.json(present(principal, live));
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
    let live = await find(principal);
    if (!live) {
      const groupId = newResourceId();
      const channelId = newResourceId();
      const devices = [...readable].slice(-LIVE_MAX_DEVICES);
      await write(deps, context, deviceGroupStream(groupId), deviceGroupDecider, { type: 'CreateDeviceGroup', id: groupId, name: LIVE_NAME, devices, createdBy: principal.id, at: context.now });
      const body = { name: LIVE_NAME, deviceGroup: groupId, mqtt: { type: 'keycloakUser' as const, recipient: principal.id } };
      await write(deps, context, channelStream(channelId), channelDecider, { type: 'CreateChannel', id: channelId, createdBy: principal.id, body, at: context.now });
      return res.status(201).json(present(principal, { channelId, deviceGroupId: groupId, devices }, refused));
    }
    const added = [...readable].filter((id) => !live!.devices.includes(id));
    if (added.length) {
      const devices = [...live.devices, ...added].slice(-LIVE_MAX_DEVICES);
      await write(deps, context, deviceGroupStream(live.deviceGroupId), deviceGroupDecider, { type: 'UpdateDeviceGroup', id: live.deviceGroupId, devices, at: context.now }, { retries: 3 });
      live = { ...live, devices };
    }
    res.json(present(principal, live, refused));
  });

  return router;
}
