import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, requireReference } from '../access.js';
import { isAdmin, type Principal } from '../../domain/access/principal.js';
import { allowedByFilters } from '../apps/visibility.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { isUuid, newResourceId } from '../../domain/shared/ids.js';
import { CHANNEL_NOT_FOUND, channelDecider, channelStream, checkChannel, type ChannelDoc } from '../../domain/channels/channel.js';
import { DEVICE_GROUP_NOT_FOUND, deviceGroupDecider, deviceGroupStream } from '../../domain/devicegroups/deviceGroup.js';
import { DEVICE_NOT_FOUND } from '../../domain/devices/device.js';

const presentChannel = (r: { id: string; doc: ChannelDoc }) => ({ _id: r.id, ...r.doc });

/**
 * Who may receive a channel's data on an output topic: the caller itself
 * (`keycloakUser` with the caller's own user id), a basic credentials set or
 * a client app (`app`) the caller may write. A platform admin (the built-in `admin` role, who
 * already manages every account) may also name any existing user. Nobody else
 * can push data into a stranger's output topics: to feed another user, that
 * user creates the channel, once the device is shared with them. Any other
 * recipient, existing or not, gets one and the same 422 (docs/security.md).
 */
async function checkRecipient(deps: Deps, principal: Principal, mqtt: { type?: string; recipient?: unknown } | undefined): Promise<void> {
  if (!mqtt) return;
  const refused = () =>
    ValidationError.field('mqtt.recipient', 'must be your own user id (type keycloakUser), or the id of a basic credentials set (type basicCredentialsSet) or an app (type app) you may write');
  if (mqtt.type === 'keycloakUser') {
    if (typeof mqtt.recipient !== 'string') throw refused();
    if (mqtt.recipient.toLowerCase() === principal.id.toLowerCase()) return;
    const user = isAdmin(principal) && isUuid(mqtt.recipient) && (await deps.db.selectFrom('users').select('id').where('id', '=', mqtt.recipient).executeTakeFirst());
    if (!user) throw refused();
  } else if (mqtt.type === 'basicCredentialsSet') {
    await requireReference(deps, principal, mqtt.recipient, 'write', refused());
  } else if (mqtt.type === 'app') {
    await requireReference(deps, principal, mqtt.recipient, 'write', refused());
    // An app hidden from the caller by an app filter is as unknown as one that does not exist.
    const app = await deps.db.selectFrom('apps').select('id').where('id', '=', mqtt.recipient as string).where(allowedByFilters(principal, 'apps.id')).executeTakeFirst();
    if (!app) throw refused();
  }
}

/** Channels and device groups. */
export function channelRoutes(deps: Deps): Router {
  const router = Router();

  const groupOf = async (id: string) => {
    const group = await deps.db.selectFrom('device_groups').select(['id', 'name']).where('id', '=', id).executeTakeFirstOrThrow();
    const members = await deps.db.selectFrom('device_group_members').select('device_id').where('group_id', '=', id).orderBy('position').execute();
    return { _id: group.id, name: group.name, devices: members.map((m) => m.device_id) };
  };

  /** Devices put in a group must exist and be readable by the caller: one query for the whole list, however long. */
  const checkDevices = async (req: Parameters<Parameters<Router['post']>[1]>[0], devices: string[]) => {
    if (devices.length === 0) return;
    const readable = new Set(
      (await deps.db.selectFrom('devices').select('id').where('id', '=', sql<string>`ANY(${[...new Set(devices)]}::text[])`).where(readableBy(principalOf(req), 'devices.id')).execute()).map((r) => r.id),
    );
    const i = devices.findIndex((id) => !readable.has(id));
    if (i >= 0) throw ValidationError.field(`devices.${i}`, 'is not an iotnode you can read');
  };

  // ---- channels ----
  router.post('/api/channels', async (req, res) => {
    const body = req.body as ChannelDoc;
    const principal = principalOf(req);
    checkChannel(body);
    // The target must be readable: a channel exports its data.
    if (typeof body.iotnode === 'string') await requireAccess(deps, principal, body.iotnode, 'read', DEVICE_NOT_FOUND);
    if (typeof body.deviceGroup === 'string') await requireAccess(deps, principal, body.deviceGroup, 'read', DEVICE_GROUP_NOT_FOUND);
    await checkRecipient(deps, principal, body.mqtt as { type?: string; recipient?: unknown } | undefined);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, channelStream(id), channelDecider, { type: 'CreateChannel', id, createdBy: context.actor, body, at: context.now });
    const row = await deps.db.selectFrom('channels').select(['id', 'doc']).where('id', '=', id).executeTakeFirstOrThrow();
    res.status(201).json(presentChannel(row));
  });

  router.get('/api/channels', async (req, res) => {
    let query = deps.db.selectFrom('channels').select(['id', 'doc']).where(readableBy(principalOf(req), 'channels.id'));
    if (typeof req.query.iotnode === 'string') query = query.where('iotnode', '=', req.query.iotnode);
    if (typeof req.query.deviceGroup === 'string') query = query.where('device_group', '=', req.query.deviceGroup);
    const rows = await query.orderBy('created_at').orderBy('id').execute();
    res.json(rows.map(presentChannel));
  });

  router.get('/api/channels/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', CHANNEL_NOT_FOUND);
    res.json(presentChannel(await deps.db.selectFrom('channels').select(['id', 'doc']).where('id', '=', id).executeTakeFirstOrThrow()));
  });

  router.put('/api/channels/:id', async (req, res) => {
    const id = req.params.id as string;
    const body = req.body as ChannelDoc;
    const principal = principalOf(req);
    await requireAccess(deps, principal, id, 'write', CHANNEL_NOT_FOUND);
    checkChannel(body);
    await checkRecipient(deps, principal, body.mqtt as { type?: string; recipient?: unknown } | undefined);
    const context = requestContext(deps, req);
    await write(deps, context, channelStream(id), channelDecider, { type: 'ReplaceChannel', id, body, at: context.now });
    res.json(presentChannel(await deps.db.selectFrom('channels').select(['id', 'doc']).where('id', '=', id).executeTakeFirstOrThrow()));
  });

  router.delete('/api/channels/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', CHANNEL_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, channelStream(id), channelDecider, { type: 'DeleteChannel', id, at: context.now });
    res.status(204).end();
  });

  // ---- device groups ----
  router.post('/api/devicegroups', async (req, res) => {
    const { name, devices = [] } = req.body as { name: string; devices?: string[] };
    await checkDevices(req, devices);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, deviceGroupStream(id), deviceGroupDecider, { type: 'CreateDeviceGroup', id, name, devices, createdBy: context.actor, at: context.now });
    res.status(201).json(await groupOf(id));
  });

  router.get('/api/devicegroups', async (req, res) => {
    const rows = await deps.db
      .selectFrom('device_groups')
      .select('id')
      .where(readableBy(principalOf(req), 'device_groups.id'))
      .orderBy('name')
      .orderBy('id')
      .execute();
    res.json(await Promise.all(rows.map((r) => groupOf(r.id))));
  });

  router.get('/api/devicegroups/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_GROUP_NOT_FOUND);
    res.json(await groupOf(id));
  });

  router.patch('/api/devicegroups/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', DEVICE_GROUP_NOT_FOUND);
    const { name, devices } = req.body as { name?: string; devices?: string[] };
    if (devices) await checkDevices(req, devices);
    const context = requestContext(deps, req);
    await write(deps, context, deviceGroupStream(id), deviceGroupDecider, { type: 'UpdateDeviceGroup', id, name, devices, at: context.now }, { retries: 3 });
    res.json(await groupOf(id));
  });

  router.delete('/api/devicegroups/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', DEVICE_GROUP_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, deviceGroupStream(id), deviceGroupDecider, { type: 'DeleteDeviceGroup', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
