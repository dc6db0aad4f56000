import { ValidationError } from '../shared/errors.js';

/** `[longitude, latitude]`, WGS 84. */
export type Position = [number, number];

/** A GeoJSON polygon with exactly one ring (no holes). */
export interface Polygon {
  type: 'Polygon';
  coordinates: Position[][];
}

/**
 * The rules of a ring that JSON schema cannot say. The shape (type `Polygon`,
 * exactly one ring, 4 to 1,000 positions of two numbers) is the OpenAPI
 * schema's job (`GeofencePolygon`, `GeofenceRing`); simplicity and
 * orientation need geometry and are checked by PostGIS (`api/geofences/postgis.ts`).
 * `field` names the ring in the message, such as `fence.coordinates.0`.
 */
export function checkRing(ring: readonly (readonly number[])[], field: string): void {
  ring.forEach(([lng, lat], i) => {
    // `!(a <= x)` is also true for NaN, so a non-number never passes.
    if (!(lng! >= -180 && lng! <= 180)) throw ValidationError.field(`${field}.${i}`, `longitude ${lng} is outside [-180, 180] (positions are [longitude, latitude])`);
    if (!(lat! >= -90 && lat! <= 90)) throw ValidationError.field(`${field}.${i}`, `latitude ${lat} is outside [-90, 90] (positions are [longitude, latitude])`);
  });
  const first = ring[0]!;
  const last = ring[ring.length - 1]!;
  if (first[0] !== last[0] || first[1] !== last[1]) throw ValidationError.field(field, 'must be a closed ring: the last position must equal the first');
}

/** The outcome of the geometric checks, as PostGIS reports them. */
export interface GeometryVerdict {
  /** `ST_IsValid` and `ST_IsSimple`. */
  simple: boolean;
  /** `ST_IsValidReason`, such as `Self-intersection[1 1]`. */
  reason: string;
  /** `ST_IsPolygonCCW`. */
  counterClockwise: boolean;
}

/**
 * A clockwise ring is refused rather than reversed: the contract says the ring
 * is counter-clockwise, and silently storing something other than what was
 * sent would surprise a client that reads the fence back.
 */
export function checkGeometry(verdict: GeometryVerdict, field: string): void {
  if (!verdict.simple) throw ValidationError.field(field, `must be a simple polygon without self-intersections (${verdict.reason})`);
  if (!verdict.counterClockwise) throw ValidationError.field(field, 'must be counter-clockwise; this ring is clockwise, reverse its positions');
}
