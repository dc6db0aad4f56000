import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import type { FenceGeometry } from './postgis.js';
import { GEOFENCE_NOT_FOUND, geofenceDecider, geofenceFields, geofenceStream, presentGeofence, type GeofenceFields } from '../../domain/geofences/geofence.js';
import { stateOfRow } from '../../projections/geofences.js';
import { resourceAt, resourceRevisions, timeOf } from '../history.js';
import type { Polygon } from '../../domain/geofences/fence.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import type { GeofencesTable } from '../../projections/geofences.js';

type Body = { fence: Polygon; ref?: string; refType?: 'device' };
type Row = Pick<GeofencesTable, 'id' | 'fence' | 'ref' | 'ref_type' | 'created_by' | 'created_at' | 'updated_at'>;

const COLUMNS = ['id', 'fence', 'ref', 'ref_type', 'created_by', 'created_at', 'updated_at'] as const;

const toGeofence = (row: Row) => presentGeofence(stateOfRow(row));

/**
 * The stored fence, and with a `reader` only if that caller may read it: the
 * object check and the row in one query. No row is 404, whether the id is
 * unknown, not readable, or names another kind of resource.
 */
async function selectGeofence(deps: Deps, id: string, reader?: Principal): Promise<Row> {
  let query = deps.db.selectFrom('geofences').select(COLUMNS).where('id', '=', id);
  if (reader) query = query.where(readableBy(reader, 'geofences.id'));
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError(GEOFENCE_NOT_FOUND);
  return row;
}

/**
 * The body's rules in order: shape (OpenAPI), ring (domain), geometry
 * (PostGIS), then the linked device. Tracking writes to the linked device,
 * so linking needs write access to it; a device the caller cannot read is
 * reported as not a device, so its existence does not leak.
 */
async function checkedFields(deps: Deps, geometry: FenceGeometry, principal: Principal, body: Body): Promise<GeofenceFields> {
  const fields = geofenceFields(body);
  await geometry.check(deps.db, fields.fence, 'fence.coordinates.0');
  if (fields.ref !== null) {
    try {
      await requireAccess(deps, principal, fields.ref, 'write');
    } catch (error) {
      if (error instanceof NotFoundError) throw ValidationError.field('ref', 'is not a device you can read');
      if (error instanceof ForbiddenError) throw ValidationError.field('ref', 'is a device you cannot write; tracking updates the linked device');
      throw error;
    }
    const device = await deps.db.selectFrom('devices').select('id').where('id', '=', fields.ref).executeTakeFirst();
    if (!device) throw ValidationError.field('ref', 'is not a device you can read');
  }
  return fields;
}

export function geofenceRoutes(deps: Deps, geometry: FenceGeometry): Router {
  const router = Router();

  router.post('/api/geofences', async (req, res) => {
    const fields = await checkedFields(deps, geometry, principalOf(req), req.body as Body);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, geofenceStream(id), geofenceDecider, { type: 'CreateGeofence', id, fields, createdBy: context.actor, at: context.now });
    res.status(201).json(toGeofence(await selectGeofence(deps, id)));
  });

  router.get('/api/geofences', async (req, res) => {
    const { ref, limit, offset } = req.query as unknown as { ref?: string; limit?: number; offset?: number };
    let query = deps.db
      .selectFrom('geofences')
      .select(COLUMNS)
      .where(readableBy(principalOf(req), 'geofences.id'));
    if (ref !== undefined) query = query.where('ref', '=', ref);
    const rows = await query.orderBy('created_at').orderBy('id').limit(limit ?? 1000).offset(offset ?? 0).execute();
    res.json(rows.map(toGeofence));
  });

  router.get('/api/geofences/:id', async (req, res) => {
    const id = req.params.id as string;
    const at = timeOf(req);
    if (at === undefined) {
      res.json(toGeofence(await selectGeofence(deps, id, principalOf(req))));
      return;
    }
    await requireAccess(deps, principalOf(req), id, 'read', GEOFENCE_NOT_FOUND);
    const { state } = await resourceAt(deps, geofenceStream(id), geofenceDecider, at);
    if (state.status !== 'active') throw new NotFoundError(GEOFENCE_NOT_FOUND);
    res.json(presentGeofence(state));
  });

  router.get('/api/geofences/:id/revisions', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', GEOFENCE_NOT_FOUND);
    res.json(await resourceRevisions(deps, geofenceStream(id), geofenceDecider, (s) => (s.status === 'active' ? presentGeofence(s) : undefined)));
  });

  router.put('/api/geofences/:id', async (req, res) => {
    const id = req.params.id as string;
    const principal = principalOf(req);
    await requireAccess(deps, principal, id, 'write', GEOFENCE_NOT_FOUND);
    const fields = await checkedFields(deps, geometry, principal, req.body as Body);
    const context = requestContext(deps, req);
    await write(deps, context, geofenceStream(id), geofenceDecider, { type: 'ReplaceGeofence', id, fields, at: context.now });
    res.json(toGeofence(await selectGeofence(deps, id)));
  });

  router.delete('/api/geofences/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', GEOFENCE_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, geofenceStream(id), geofenceDecider, { type: 'DeleteGeofence', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
