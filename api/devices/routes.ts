import { Router, type Request } from 'express';
import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from '../deps.js';
import { readModelsInclude, requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, requireReference, scopesOn } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import { RateLimiter, CLAIMS_PER_MINUTE } from '../rateLimit.js';
import { writeLog } from '../../domain/logs/logEntry.js';
import { satisfies, type Scope } from '../../domain/access/scopes.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { handle, type CommandContext } from '../../domain/shared/decider.js';
import { DEVICE_NOT_FOUND, claimDecider, deviceDecider, deviceStream, mqttRegistration, presentDevice, type DeviceCommand, type DeviceDoc, type DeviceEvent, type DeviceState, type DocState, evolveDocState } from '../../domain/devices/device.js';
import { resourceRevisions, timeOf } from '../history.js';
import { stateAt } from '../../domain/audit/history.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import type { Ingest } from '../../ingest/index.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { statsRoutes } from './stats.js';
import { geoqueryCondition } from '../geofences/geoquery.js';
import type { FenceGeometry } from '../geofences/postgis.js';
import { deviceAsRead } from '../../projections/devices.js';

/** Columns a list may be ordered by; any other name orders by that device field. */
const ORDER_COLUMNS: Record<string, string> = { name: 'lower(name)', category: 'category', createdAt: 'created_at', updatedAt: 'updated_at', reportedAt: 'reported_at' };

async function loadDevice(deps: Deps, id: string): Promise<DeviceDoc> {
  const row = await deps.db.selectFrom('devices').select(['id', 'doc']).where('id', '=', id).executeTakeFirst();
  if (!row) throw new NotFoundError(DEVICE_NOT_FOUND);
  return presentDevice(row.id, row.doc);
}

const escapeLike = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

function listConditions(req: Request): Expression<SqlBool>[] {
  const filter = (req.query.filter ?? {}) as Record<string, string>;
  const conditions: Expression<SqlBool>[] = [readableBy(principalOf(req), 'devices.id')];
  for (const [key, value] of Object.entries(filter)) {
    if (key === 'name') conditions.push(sql<SqlBool>`lower(name) LIKE ${`%${escapeLike(String(value).toLowerCase())}%`}`);
    else if (key === 'category') conditions.push(sql<SqlBool>`category = ${String(value)}`);
    else conditions.push(sql<SqlBool>`doc->>${key} = ${String(value)}`);
  }
  return conditions;
}

/**
 * Decides and appends a device command between ingest batches, checking a new
 * `secret` against the broker's registry (which already knows devices the
 * ingest created but the read models have not shown yet); the wait for the
 * read models happens after, outside the ingest's turn.
 */
async function writeDevice(deps: Deps, ingest: Ingest, principal: Principal, context: CommandContext, id: string, command: DeviceCommand, fields: DeviceDoc): Promise<void> {
  const secret = fields.secret;
  if (typeof secret === 'string' && ingest.registry.deviceOfSecret(secret) !== id) await checkSecretTopic(deps, ingest, principal, secret);
  const result = await ingest.exclusive(async () => {
    if (typeof secret === 'string') {
      const owner = ingest.registry.deviceOfSecret(secret);
      if (owner !== undefined && owner !== id) throw new ConflictError('ERR - secret is already the secret of another iotnode');
    }
    const handled = await handle(deps.store, deviceStream(id), deviceDecider, command, context, { retries: 3, from: await asRead(deps, id) });
    if (handled.result && typeof secret === 'string') ingest.registry.putSecret(id, secret);
    return handled.result;
  });
  if (result) await readModelsInclude(deps, result.position);
}

/** A device's decider state as of its read-model row, for `UpdateDevice` and `DeleteDevice` (see `deviceAsRead`). */
const asRead = (deps: Deps, id: string) => deviceAsRead(deps.db, id);

/**
 * A publish on a reserved topic lands on the device whose `secret` is that
 * topic: a secret that is someone else's reserved topic would take their
 * data. So a secret that is a reserved topic needs write on its credentials
 * set (a reservation made later checks the device the same way, in
 * api/credentials).
 */
async function checkSecretTopic(deps: Deps, ingest: Ingest, principal: Principal, secret: string): Promise<void> {
  const reserved = ingest.registry.reservedTopic(secret);
  if (!reserved) return;
  if (!satisfies(await scopesOn(deps, principal, reserved.setId), 'write')) {
    throw ValidationError.field('secret', 'is a reserved MQTT topic of a credentials set you may not write');
  }
}

/**
 * A device bound to a connector takes that connector's uplinks (by `devEui` or
 * topic) and sends its commands: binding one to someone else's connector would
 * take over their devices. An existing connector must be one the caller may
 * write; a connector id of no connector is stored as given (nothing arrives
 * through it), as the contract stores ids without checking them.
 */
async function checkConnectorReference(deps: Deps, principal: Principal, value: unknown): Promise<void> {
  const id = typeof value === 'object' && value !== null ? (value as { _id?: unknown })._id : value;
  if (typeof id !== 'string') return;
  const exists = await deps.db.selectFrom('connectors').select('id').where('id', '=', id).executeTakeFirst();
  if (!exists) return;
  await requireReference(deps, principal, id, 'write', ValidationError.field('connector', 'must be a connector you may write'));
}

/**
 * The device's document at `at`: from its latest snapshot stamped by then
 * (`device_snapshots`, every few hundred events), the events after it folded
 * as the read model folds them.
 */
export async function deviceAt(deps: Deps, id: string, at: string): Promise<DocState> {
  const snapshot = await deps.db
    .selectFrom('device_snapshots')
    .select(['revision', 'doc'])
    .where('device_id', '=', id)
    .where('time', '<=', at)
    .orderBy('revision', 'desc')
    .limit(1)
    .executeTakeFirst();
  const fold = { initial: (): DocState => ({ status: 'none' }), evolve: (s: DocState, e: RecordedEvent) => evolveDocState(s, e as unknown as DeviceEvent) };
  const from = snapshot ? { state: { status: 'active', doc: snapshot.doc } as DocState, revision: snapshot.revision } : undefined;
  return (await stateAt(deps.store, deviceStream(id), fold, at, from)).state;
}

export function deviceRoutes(deps: Deps, ingest: Ingest, geometry: FenceGeometry): Router {
  const router = Router();

  router.get('/api/iotnodes', async (req, res) => {
    const conditions = listConditions(req);
    if (typeof req.query.geoquery === 'string') conditions.push(await geoqueryCondition(deps, geometry, principalOf(req), req.query.geoquery, 'devices.lnglat'));
    const where = sql.join(conditions, sql` AND `);
    const orderBy = String(req.query.orderBy ?? 'name');
    const desc = orderBy.startsWith('-');
    const key = desc ? orderBy.slice(1) : orderBy;
    const column = ORDER_COLUMNS[key] ? sql.raw(ORDER_COLUMNS[key]!) : sql`doc->${key}`;
    const limit = Number(req.query.limit ?? 100);
    const offset = Number(req.query.offset ?? 0);
    const { rows } = await sql<{ id: string; doc: DeviceDoc }>`SELECT id, doc FROM devices WHERE ${where}
      ORDER BY ${column} ${sql.raw(desc ? 'DESC NULLS LAST' : 'ASC NULLS LAST')}, id LIMIT ${limit} OFFSET ${offset}`.execute(deps.db);
    const fields = typeof req.query.fields === 'string' ? req.query.fields.split(',').filter(Boolean) : null;
    const devices = rows.map((r) => {
      const device = presentDevice(r.id, r.doc);
      return fields ? Object.fromEntries(Object.entries(device).filter(([k]) => k === '_id' || fields.includes(k))) : device;
    });
    const options = String(req.query.options ?? '').split(',');
    if (options.includes('count')) {
      const { rows: count } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM devices WHERE ${where}`.execute(deps.db);
      res.setHeader('X-Total-Count', String(count[0]!.n));
    }
    res.json(devices);
  });

  router.post('/api/iotnodes', async (req, res) => {
    const fields = req.body as DeviceDoc;
    if (fields.connector !== undefined) await checkConnectorReference(deps, principalOf(req), fields.connector);
    const id = newResourceId();
    const context = requestContext(deps, req);
    // Serialised with the ingest pipeline, so a device and a first MQTT message cannot both create a device for one secret.
    await writeDevice(deps, ingest, principalOf(req), context, id, { type: 'RegisterDevice', id, createdBy: context.actor, fields, at: context.now }, fields);
    res.status(201).json(await loadDevice(deps, id));
  });

  // The contract's onboarding: a user enters a device's secret (its reserved topic) and the device is claimed.
  const claims = new RateLimiter('claims', CLAIMS_PER_MINUTE);
  router.post('/api/iotnodes/claim', async (req, res) => {
    const { secret } = req.body as { secret: string };
    const principal = principalOf(req);
    claims.take(principal.id);
    const context = requestContext(deps, req);
    const id = await ingest.exclusive(async () => {
      const existing = ingest.registry.deviceOfSecret(secret);
      if (existing) return existing;
      // Claimed before any data flowed: the device is created as its first message would create it.
      const reserved = ingest.registry.reservedTopic(secret);
      const set = reserved && ingest.registry.credentialsSet(reserved.setId);
      if (!reserved || !set) throw new NotFoundError(DEVICE_NOT_FOUND);
      const deviceId = newResourceId();
      const event = mqttRegistration(deviceId, secret, set.id, set.createdBy, context.now);
      await deps.store.append(deviceStream(deviceId), [toNewEvent(event, context)], 'no_stream');
      ingest.registry.putSecret(deviceId, secret);
      return deviceId;
    });
    // Read from the stream: a device created by this very claim is not in the read models yet.
    const current = (await deps.store.readStream(deviceStream(id))).reduce((s, e) => claimDecider.evolve(s, e as unknown as DeviceEvent), claimDecider.initialState());
    // Only a device a credentials set reports is claimable: one created over REST (or whose set is gone) answers as an unknown secret,
    // since knowing a secret must not hand out rights on a device someone else owns.
    const setId = current.status === 'active' ? current.credentialsSetId : null;
    if (setId === null || !ingest.registry.credentialsSet(setId)) throw new NotFoundError(DEVICE_NOT_FOUND);
    const setRights = await deps.db.selectFrom('access_rights').select(['subject_type', 'subject_id', 'scope']).where('resource_id', '=', setId).orderBy('subject_type').orderBy('subject_id').execute();
    // Consent to a claim of a claimed device: its owner shared the device, or its credentials set, with the claimer.
    const held = new Set([...(await scopesOn(deps, principal, id)), ...(await scopesOn(deps, principal, setId))]);
    const command: DeviceCommand = {
      type: 'ClaimDevice',
      id,
      userId: principal.id,
      username: principal.username,
      consented: satisfies(held, 'read'),
      setRights: setRights.map((r) => ({ subjectType: r.subject_type, subjectId: r.subject_id, scope: r.scope as Scope[] })),
      at: context.now,
    };
    try {
      await write(deps, context, deviceStream(id), claimDecider, command, { retries: 3 });
    } catch (error) {
      if (error instanceof NotFoundError) {
        // The owner sees who tried; the caller learns nothing it could not learn from an unknown secret.
        await writeLog(deps.store, {
          resourceId: id,
          resourceType: 'device',
          type: 'warning',
          priority: 'high',
          category: 'access',
          message: `A claim by user ${principal.username} (${principal.id}) was refused: the device is already claimed; share it to give access`,
        }, context);
      }
      throw error;
    }
    res.json(await loadDevice(deps, id));
  });

  router.get('/api/iotnodes/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_NOT_FOUND);
    const at = timeOf(req);
    if (at === undefined) {
      res.json(await loadDevice(deps, id));
      return;
    }
    // Time travel: the device folded from its events up to `at` (the same `evolveDoc` as the read model); rights as they are now.
    const state = await deviceAt(deps, id, at);
    if (state.status !== 'active') throw new NotFoundError(DEVICE_NOT_FOUND);
    res.json(presentDevice(id, state.doc));
  });

  router.get('/api/iotnodes/:id/revisions', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', DEVICE_NOT_FOUND);
    // The device's own reports are telemetry (history and stats keep them); every other change is a revision.
    const view = (s: DeviceState) => (s.status === 'active' ? { ...presentDevice(id, s.doc), claimedBy: s.claimedBy } : undefined);
    res.json(await resourceRevisions(deps, deviceStream(id), deviceDecider, view, (e) => e.type !== 'DeviceReported'));
  });

  router.put('/api/iotnodes/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', DEVICE_NOT_FOUND);
    const fields = req.body as DeviceDoc;
    if (fields.connector !== undefined) await checkConnectorReference(deps, principalOf(req), fields.connector);
    const context = requestContext(deps, req);
    await writeDevice(deps, ingest, principalOf(req), context, id, { type: 'UpdateDevice', id, fields, at: context.now }, fields);
    res.json(await loadDevice(deps, id));
  });

  router.delete('/api/iotnodes/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', DEVICE_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, deviceStream(id), deviceDecider, { type: 'DeleteDevice', id, at: context.now }, { retries: 3, from: await asRead(deps, id) });
    res.status(204).end();
  });

  router.use(statsRoutes(deps));
  return router;
}
