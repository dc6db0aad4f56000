import { sql, type Transaction } from 'kysely';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import type { RecordedEvent } from '../domain/shared/events.js';
import { geofenceDecider, type ActiveGeofence, type GeofenceEvent } from '../domain/geofences/geofence.js';
import type { DeviceEvent } from '../domain/devices/device.js';
import type { Polygon } from '../domain/geofences/fence.js';
import { isResourceId } from '../domain/shared/ids.js';

export interface GeofencesTable {
  id: string;
  /** The polygon exactly as sent, for answering. */
  fence: Polygon;
  /** The same polygon as `geometry(Polygon, 4326)`, GiST-indexed; only ever used inside SQL. */
  geom: unknown;
  ref: string | null;
  ref_type: string | null;
  created_by: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export interface GeofencePresenceTable {
  tracker_id: string;
  asset_id: string;
}

export interface GeofencesTables {
  geofences: GeofencesTable;
  geofence_presence: GeofencePresenceTable;
}

/** A GeoJSON polygon as a PostGIS geometry in WGS 84. */
export const geometryOf = (fence: Polygon) => sql`ST_SetSRID(ST_GeomFromGeoJSON(${JSON.stringify(fence)}), 4326)`;

const EVENTS = new Set(['GeofenceCreated', 'GeofenceReplaced', 'GeofenceDeleted']);

/**
 * Geofences, folded with the decider's `evolve` and guarded by stream revision, and the presence of assets inside
 * trackers' fences, replaced whole from each tracker's `assetList`; applying a
 * batch again ends in the same rows.
 */
export const geofencesProjection: Projection = {
  name: 'geofences',
  tables: ['geofence_presence', 'geofences'],
  async apply(tx, batch) {
    for (const event of batch) {
      if (EVENTS.has(event.type)) await applyEvent(tx, event as RecordedEvent & GeofenceEvent);
      else await applyAssetList(tx, event as RecordedEvent & DeviceEvent);
    }
  },
};

/** The devices a tracker's `assetList` names: device ids only, since a client may write any list (and any text) there. */
const assetIds = (list: unknown): string[] =>
  Array.isArray(list) ? list.flatMap((a) => { const id = (a as { assetId?: unknown })?.assetId; return isResourceId(id) ? [id] : []; }) : [];

async function applyAssetList(tx: Transaction<Database>, event: RecordedEvent & DeviceEvent): Promise<void> {
  let list: unknown;
  switch (event.type) {
    case 'DeviceRegistered':
      if (!('assetList' in event.data.doc)) return;
      list = event.data.doc.assetList;
      break;
    case 'DeviceUpdated':
      if ('assetList' in event.data.set) list = event.data.set.assetList;
      else if (event.data.unset.includes('assetList')) list = [];
      else return;
      break;
    case 'DeviceDeleted':
      list = [];
      break;
    default:
      return;
  }
  const tracker = event.data.id;
  await tx.deleteFrom('geofence_presence').where('tracker_id', '=', tracker).execute();
  const ids = [...new Set(assetIds(list))];
  if (ids.length) await tx.insertInto('geofence_presence').values(ids.map((asset_id) => ({ tracker_id: tracker, asset_id }))).execute();
}

/** The row as the state the decider folds, so the read model and time travel agree on every field. */
export function stateOfRow(row: Pick<GeofencesTable, 'id' | 'fence' | 'ref' | 'ref_type' | 'created_by' | 'created_at' | 'updated_at'>): ActiveGeofence {
  return {
    status: 'active',
    id: row.id,
    fence: row.fence,
    ref: row.ref,
    refType: row.ref_type as ActiveGeofence['refType'],
    createdBy: row.created_by,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** One event folded into its fence's row with the decider's own `evolve`, guarded by the stream revision. */
async function applyEvent(tx: Transaction<Database>, event: RecordedEvent & GeofenceEvent): Promise<void> {
  const id = event.data.id;
  const row = await tx.selectFrom('geofences').select(['id', 'fence', 'ref', 'ref_type', 'created_by', 'created_at', 'updated_at', 'revision']).where('id', '=', id).forUpdate().executeTakeFirst();
  if (row && event.revision <= row.revision) return;
  // No row for a later event: the fence was deleted, and a repeat of its creation is already behind it.
  if (!row && event.revision > 0) return;
  const state = geofenceDecider.evolve(row ? stateOfRow(row) : geofenceDecider.initialState(), event);
  if (state.status !== 'active') {
    await tx.deleteFrom('geofences').where('id', '=', id).execute();
    return;
  }
  const values = sql`${JSON.stringify(state.fence)}::jsonb, ${geometryOf(state.fence)}, ${state.ref}, ${state.refType}, ${state.createdBy}, ${event.revision}, ${new Date(state.createdAt)}, ${new Date(state.updatedAt)}`;
  await sql`INSERT INTO geofences (id, fence, geom, ref, ref_type, created_by, revision, created_at, updated_at) VALUES (${id}, ${values})
    ON CONFLICT (id) DO UPDATE SET fence = EXCLUDED.fence, geom = EXCLUDED.geom, ref = EXCLUDED.ref, ref_type = EXCLUDED.ref_type,
      revision = EXCLUDED.revision, updated_at = EXCLUDED.updated_at`.execute(tx);
}
