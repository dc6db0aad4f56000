import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import { derivedResourceId } from '../../domain/shared/ids.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import { channelDecider, channelStream, type ChannelCommand } from '../../domain/channels/channel.js';
import { deviceGroupDecider, deviceGroupStream, type DeviceGroupCommand } from '../../domain/devicegroups/deviceGroup.js';

/** The name that marks a user's live channel and its device group among the user's own. */
export const LIVE_NAME = 'live data (control panel)';
/** The most devices a live channel carries; past it the devices added longest ago leave. */
export const LIVE_MAX_DEVICES = 1000;

/** Re-decisions of a live write that lost a race with another (concurrent adds of one user's panel tabs). */
const RETRIES = 8;

/**
 * The ids to try, in order: `known` (what the read model shows) first, then
 * ids derived from `parts`, each next one derived from the one before, for
 * when the one before was deleted. Concurrent first calls derive the same id
 * and so converge on one group and one channel.
 */
function* candidates(known: string | null, parts: string[]): Generator<string> {
  if (known) yield known;
  for (let id = derivedResourceId('live', ...parts); ; id = derivedResourceId('live', ...parts, id)) yield id;
}

/** Null when the stream holds a deleted (or, for a group, renamed) resource: the caller tries its next id. */
async function nextIfGone<T>(attempt: () => Promise<T>): Promise<T | null> {
  try {
    return await attempt();
  } catch (error) {
    if (error instanceof NotFoundError) return null;
    throw error;
  }
}

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
   * The user's live device group and its channel, as the read models show
   * them. They are created one after the other, under ids derived from the
   * user (`candidates`); a group left without its channel (a crash in between)
   * is completed by the next call, never duplicated.
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

    // The group: the one the read model knows, else the user's own derived one, so concurrent first calls
    // create one group. The devices are added on the group's stream, where a writer that lost a race decides again.
    let group: { id: string; devices: string[] } | null = null;
    for (const groupId of candidates(live.groupId, ['devicegroup', principal.id])) {
      const command: DeviceGroupCommand = {
        type: 'AddDevices',
        id: groupId,
        devices: [...readable],
        keepAtMost: LIVE_MAX_DEVICES,
        create: { name: LIVE_NAME, createdBy: principal.id },
        at: context.now,
      };
      const handled = await nextIfGone(() => write(deps, context, deviceGroupStream(groupId), deviceGroupDecider, command, { retries: RETRIES }));
      if (handled?.state.status === 'active') group = { id: groupId, devices: handled.state.devices };
      if (group) break;
    }

    // The channel on it: the one the read model knows, else one derived from the user and the group.
    let channel: { id: string; created: boolean } | null = null;
    const body = { name: LIVE_NAME, deviceGroup: group!.id, mqtt: { type: 'keycloakUser' as const, recipient: principal.id } };
    for (const channelId of candidates(live.groupId === group!.id ? live.channelId : null, ['channel', principal.id, group!.id])) {
      const command: ChannelCommand = { type: 'CreateChannel', id: channelId, createdBy: principal.id, body, once: true, at: context.now };
      const handled = await nextIfGone(() => write(deps, context, channelStream(channelId), channelDecider, command, { retries: RETRIES }));
      // A derived channel whose recipient was replaced since is no longer the user's live channel.
      const state = handled?.state;
      if (state?.status === 'active' && (state.doc.mqtt as { recipient?: string } | undefined)?.recipient === principal.id) channel = { id: channelId, created: handled!.events.length > 0 };
      if (channel) break;
    }
    res.status(channel!.created ? 201 : 200).json(present(principal, { channelId: channel!.id, deviceGroupId: group!.id, devices: group!.devices }, refused));
  });

  return router;
}
