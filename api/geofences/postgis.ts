import { sql, type Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import { checkGeometry, type Polygon } from '../../domain/geofences/fence.js';
import { geometryOf } from '../../projections/geofences.js';

/**
 * The geometric rules, answered by PostGIS on the same geometry the fence is
 * stored and queried as: simple (`ST_IsValid` and `ST_IsSimple`) and
 * counter-clockwise (`ST_IsPolygonCCW`). Runs after the shape and ring checks,
 * so the input always parses.
 */
export async function checkFenceGeometry(db: Kysely<Database>, fence: Polygon, field: string): Promise<void> {
  const { rows } = await sql<{ valid: boolean; simple: boolean; reason: string; ccw: boolean }>`
    SELECT ST_IsValid(g) AS valid, ST_IsSimple(g) AS simple, ST_IsValidReason(g) AS reason, ST_IsPolygonCCW(g) AS ccw
    FROM (SELECT ${geometryOf(fence)} AS g) f`.execute(db);
  const row = rows[0]!;
  checkGeometry({ simple: row.valid && row.simple, reason: row.reason, counterClockwise: row.ccw }, field);
}
