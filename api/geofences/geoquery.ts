import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from '../deps.js';
import type { Principal } from '../../domain/access/principal.js';
import { readableBy } from '../access.js';
import { parseGeoquery } from '../../domain/geofences/geoquery.js';
import { GEOFENCE_NOT_FOUND } from '../../domain/geofences/geofence.js';
import { checkRing, type Polygon, type Position } from '../../domain/geofences/fence.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import type { FenceGeometry } from './postgis.js';
import { geometryOf } from '../../projections/geofences.js';

/**
 * `geoquery` as a SQL condition on a point column (`devices.lnglat`): strict
 * containment (`ST_Contains`, so a point on the boundary does not match, and a
 * device without a position never does), answered by the column's GiST index.
 * The inline polygon passes the same rules as a stored fence; a stored fence
 * must exist and be readable by the caller (404 otherwise).
 */
export async function geoqueryCondition(deps: Deps, geometry: FenceGeometry, principal: Principal, text: string, column: string): Promise<Expression<SqlBool>> {
  const query = parseGeoquery(text);
  if (query.kind === 'fence') {
    // One query for the object check and the row: a readable id may name a device, not a fence.
    const fence = await deps.db.selectFrom('geofences').select('id').where('id', '=', query.id).where(readableBy(principal, 'geofences.id')).executeTakeFirst();
    if (!fence) throw new NotFoundError(GEOFENCE_NOT_FOUND);
    return sql<SqlBool>`ST_Contains((SELECT g.geom FROM geofences g WHERE g.id = ${query.id}), ${sql.ref(column)})`;
  }
  geometry.checkShape(query.ring, 'geoquery.coordinates');
  const ring = query.ring as Position[];
  checkRing(ring, 'geoquery.coordinates');
  const fence: Polygon = { type: 'Polygon', coordinates: [ring] };
  await geometry.check(deps.db, fence, 'geoquery.coordinates');
  return sql<SqlBool>`ST_Contains(${geometryOf(fence)}, ${sql.ref(column)})`;
}
