import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess } from '../access.js';
import { comparePositions, type Position } from '../../domain/shared/events.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { DEVICE_NOT_FOUND, decideReport, deviceStream, presentDevice, type DeviceDoc } from '../../domain/devices/device.js';
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
      translation.settled(decoded);
      const reports = [{ deviceId: id, payload: decoded.payload }, ...decoded.updates];
      let last: Position | null = null;
      try {
        for (const r of reports) {
          const { events } = decideReport({ type: 'ReportDevice', id: r.deviceId, source: `/api/iotnodes/${id}/uplinks`, path: [], payload: r.payload, reportedAt: context.now });
          const { position: p } = await deps.store.append(deviceStream(r.deviceId), events.map((e) => toNewEvent(e, context)), 'any');
          if (!last || comparePositions(p, last) > 0) last = p;
        }
      } catch (error) {
        translation.forget(reports.map((r) => r.deviceId));
        throw error;
      }
      return last!;
    });
    await deps.projections.waitFor(position, deps.config.projectionWaitMs);
    const row = await deps.db.selectFrom('devices').select(['id', 'doc']).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(DEVICE_NOT_FOUND);
    res.json(presentDevice(row.id, row.doc));
  });

  return router;
}
