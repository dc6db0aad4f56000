import { Router } from 'express';
import type { Deps } from '../deps.js';
import { readModelsInclude, requestContext } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess } from '../access.js';
import { comparePositions, type NewEvent, type Position } from '../../domain/shared/events.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { newEventId } from '../../domain/shared/ids.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { DEVICE_NOT_FOUND, decideUplink, presentDevice, type DeviceDoc } from '../../domain/devices/device.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import type { Ingest } from '../../ingest/index.js';
import type { Translation } from '../../ingest/translate.js';

/**
 * `POST /api/iotnodes/{id}/uplinks`: a raw uplink over HTTP, decoded exactly
 * as one published on the device's reserved topic. It runs between ingest
 * batches, so its report and the device's MQTT reports apply in one order and
 * chained translators see each other's output.
 */
export function uplinkRoutes(deps: Deps, ingest: Ingest, translation: Translation): Router {
  const router = Router();

  router.post('/api/iotnodes/:id/uplinks', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', DEVICE_NOT_FOUND);
    const body = req.body as DeviceDoc;
    const context = requestContext(deps, req);
    const position = await ingest.exclusive(async () => {
      const exists = await deps.db.selectFrom('devices').select('id').where('id', '=', id).executeTakeFirst();
      if (!exists) throw new NotFoundError(DEVICE_NOT_FOUND);
      const decoded = (await translation.decode(id, body, context.now)) ?? { payload: body, updates: [] };
      translation.settled(decoded, context.now);
      // The device's report and its sub-devices' (a gateway's `additionalDeviceUpdates`) are one decision, stored in
      // one append as ingest stores them: all or none, so a failure leaves nothing for a retry to double.
      const { appends } = decideUplink({ type: 'ReportDevice', id, source: `/api/iotnodes/${id}/uplinks`, path: [], payload: decoded.payload, updates: decoded.updates, reportedAt: context.now });
      const stored = appends.map((a) => ({ streamId: a.streamId, events: a.events.map((e) => toNewEvent(e, context, newEventId())) }));
      try {
        return await appendAll(deps.store, stored);
      } catch (error) {
        translation.forget(decoded.updates.map((u) => u.deviceId).concat(id));
        throw error;
      }
    });
    await readModelsInclude(deps, position);
    const row = await deps.db.selectFrom('devices').select(['id', 'doc']).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(DEVICE_NOT_FOUND);
    res.json(presentDevice(row.id, row.doc));
  });

  return router;
}

/**
 * The streams' events in one atomic append, the position of the last; a store
 * without one (EventStoreDB) takes them stream by stream.
 */
async function appendAll(store: EventStore, appends: { streamId: string; events: NewEvent[] }[]): Promise<Position> {
  if (store.appendMany) return (await store.appendMany(appends))!;
  let last: Position | null = null;
  for (const a of appends) {
    const { position } = await store.append(a.streamId, a.events, 'any');
    if (!last || comparePositions(position, last) > 0) last = position;
  }
  return last!;
}
