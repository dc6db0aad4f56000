import { sql, type Kysely } from 'kysely';
import { RecentMemory } from '../../domain/shared/recentMemory.js';
import type { Database } from '../../projections/database.js';
import { checkGeometry, type GeometryVerdict, type Polygon } from '../../domain/geofences/fence.js';
import { geometryOf } from '../../projections/geofences.js';

/**
 * Verdicts of recently checked polygons. A map or dashboard asks the same
 * geoquery again and again; the verdict of a polygon never changes, so the
 * repeat skips a database round trip. Oldest first out.
 */
const REMEMBERED = 1000;
const verdicts = new RecentMemory<string, GeometryVerdict>(REMEMBERED);

/**
 * The geometric rules, answered by PostGIS on the same geometry the fence is
 * stored and queried as: simple (`ST_IsValid` and `ST_IsSimple`) and
 * counter-clockwise (`ST_IsPolygonCCW`). Runs after the shape and ring checks,
 * so the input always parses.
 */
export async function checkFenceGeometry(db: Kysely<Database>, fence: Polygon, field: string): Promise<void> {
  const key = JSON.stringify(fence.coordinates);
  let verdict = verdicts.get(key);
  if (!verdict) {
    const { rows } = await sql<{ valid: boolean; simple: boolean; reason: string; ccw: boolean }>`
      SELECT ST_IsValid(g) AS valid, ST_IsSimple(g) AS simple, ST_IsValidReason(g) AS reason, ST_IsPolygonCCW(g) AS ccw
      FROM (SELECT ${geometryOf(fence)} AS g) f`.execute(db);
    const row = rows[0]!;
    verdict = { simple: row.valid && row.simple, reason: row.reason, counterClockwise: row.ccw };
    verdicts.set(key, verdict);
  }
  checkGeometry(verdict, field);
}
