import { sql, type Kysely } from 'kysely';
import { Ajv, type ValidateFunction } from 'ajv';
import { RecentMemory } from '../../domain/shared/recentMemory.js';
import type { Database } from '../../projections/database.js';
import { checkGeometry, type GeometryVerdict, type Polygon } from '../../domain/geofences/fence.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { geometryOf } from '../../projections/geofences.js';
import type { OpenApiDocument } from '../openapi.js';

/** How many polygons' verdicts a node remembers. */
const REMEMBERED = 1000;

/**
 * The checks of a polygon that the request validator cannot make: a ring sent in a query string against the
 * document's `GeofenceRing` schema, and the geometric rules answered by PostGIS. Built once by the composition root.
 */
export class FenceGeometry {
  /**
   * Verdicts of recently checked polygons. A map or dashboard asks the same geoquery again and again; the verdict
   * of a polygon never changes, so the repeat skips a database round trip. Oldest first out.
   */
  private readonly verdicts = new RecentMemory<string, GeometryVerdict>(REMEMBERED);
  private readonly ringSchema: ValidateFunction;

  constructor(openapi: OpenApiDocument) {
    const ajv = new Ajv({ strict: false, validateSchema: false });
    ajv.addSchema({ $id: 'openapi', components: { schemas: structuredClone(openapi.components.schemas) } });
    this.ringSchema = ajv.compile({ $ref: 'openapi#/components/schemas/GeofenceRing' });
  }

  /** The document's `GeofenceRing` schema, so a ring sent in a query string obeys the same shape as one in a body. */
  checkShape(ring: unknown, field: string): void {
    if (this.ringSchema(ring)) return;
    const error = this.ringSchema.errors![0]!;
    const at = [field, ...error.instancePath.split('/').filter(Boolean)].join('.');
    throw ValidationError.field(at, error.message ?? 'is invalid');
  }

  /**
   * The geometric rules, answered by PostGIS on the same geometry the fence is stored and queried as: simple
   * (`ST_IsValid` and `ST_IsSimple`) and counter-clockwise (`ST_IsPolygonCCW`). Runs after the shape and ring
   * checks, so the input always parses.
   */
  async check(db: Kysely<Database>, fence: Polygon, field: string): Promise<void> {
    const key = JSON.stringify(fence.coordinates);
    let verdict = this.verdicts.get(key);
    if (!verdict) {
      const { rows } = await sql<{ valid: boolean; simple: boolean; reason: string; ccw: boolean }>`
        SELECT ST_IsValid(g) AS valid, ST_IsSimple(g) AS simple, ST_IsValidReason(g) AS reason, ST_IsPolygonCCW(g) AS ccw
        FROM (SELECT ${geometryOf(fence)} AS g) f`.execute(db);
      const row = rows[0]!;
      verdict = { simple: row.valid && row.simple, reason: row.reason, counterClockwise: row.ccw };
      this.verdicts.set(key, verdict);
    }
    checkGeometry(verdict, field);
  }
}
