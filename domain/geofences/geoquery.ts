import { ValidationError } from '../shared/errors.js';
import { isResourceId } from '../shared/ids.js';

/**
 * A parsed `geoquery`: a polygon given inline (`type:contains;coordinates=[[lng,lat],...]`)
 * or a stored fence (`id:<geofence_id>`). The inline ring is returned as parsed
 * JSON; its shape and rules are checked like a fence's (`api/geofences/geoquery.ts`).
 */
export type Geoquery = { kind: 'contains'; ring: unknown } | { kind: 'fence'; id: string };

export const GEOQUERY_FORMS = 'type:contains;coordinates=[[lng,lat],...] or id:<geofence_id>';

const fail = (why: string) => ValidationError.field('geoquery', why);

/**
 * Parts are separated by `;` and written `name:value` or `name=value` (the
 * contract's own example mixes both). Names and the type are matched exactly.
 */
export function parseGeoquery(text: string): Geoquery {
  const parts = new Map<string, string>();
  for (const part of text.split(';')) {
    if (part.trim() === '') continue;
    const match = /^\s*([A-Za-z]+)\s*[:=]\s*([\s\S]*?)\s*$/.exec(part);
    if (!match) throw fail(`part '${clip(part)}' is not name:value; supported forms are ${GEOQUERY_FORMS}`);
    const [, name, value] = match as unknown as [string, string, string];
    if (name !== 'type' && name !== 'coordinates' && name !== 'id') throw fail(`'${clip(name)}' is not supported; supported forms are ${GEOQUERY_FORMS}`);
    if (parts.has(name)) throw fail(`names '${name}' twice`);
    parts.set(name, value);
  }
  const id = parts.get('id');
  if (id !== undefined) {
    if (parts.size > 1) throw fail(`id:<geofence_id> stands alone; supported forms are ${GEOQUERY_FORMS}`);
    if (!isResourceId(id)) throw fail(`id '${clip(id)}' is not a geofence id (24 hexadecimal characters)`);
    return { kind: 'fence', id };
  }
  const type = parts.get('type');
  if (type === undefined) throw fail(`needs a type; supported forms are ${GEOQUERY_FORMS}`);
  if (type !== 'contains') throw fail(`type '${clip(type)}' is not supported; only type:contains is (the device point lies inside the fence)`);
  const coordinates = parts.get('coordinates');
  if (coordinates === undefined) throw fail('type:contains needs coordinates=[[lng,lat],...], a closed polygon ring');
  let ring: unknown;
  try {
    ring = JSON.parse(coordinates);
  } catch {
    throw fail('coordinates are not valid JSON numbers in [[lng,lat],...] (NaN, Infinity and quotes are not allowed)');
  }
  if (!Array.isArray(ring) || !ring.every(Array.isArray) || ring.some((p: unknown[]) => p.some(Array.isArray))) {
    throw fail('only polygons are supported: coordinates must be one closed ring [[lng,lat],...]');
  }
  return { kind: 'contains', ring };
}

const clip = (s: string) => (s.length > 40 ? `${s.slice(0, 40)}…` : s);
