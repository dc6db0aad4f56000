import { causedId } from '../../domain/shared/ids.js';
import { sql } from 'kysely';
import type { ReactorDeps } from '../deps.js';
import { CheckpointedSubscriber } from '../../domain/eventstore/subscriber.js';
import type { Database } from '../../projections/database.js';
import { handle, toNewEvent, type CommandContext } from '../../domain/shared/decider.js';
import { positionToString, type Position, type RecordedEvent } from '../../domain/shared/events.js';
import { deviceStream, isLngLat, type DeviceDoc, type DeviceEvent } from '../../domain/devices/device.js';
import { deviceAsRead } from '../../projections/devices.js';
import { logEvent, logStream } from '../../domain/logs/logEntry.js';
import { OwnerRights } from '../rights.js';
import { crossingMessage, trackerDecider, type AssetReport, type AssetUpdate } from '../../domain/geofences/tracking.js';

const CHECKPOINT = 'geofence-tracking';
const ACTOR = 'system:geofence-tracking';

type Point = { type: 'Point'; coordinates: [number, number] };

/** A device event that sets or removes a device's position: the point, null for removed, undefined for no position change. */
export function positionOf(event: RecordedEvent): Point | null | undefined {
  const e = event as unknown as DeviceEvent;
  switch (e.type) {
    case 'DeviceRegistered':
      return isLngLat(e.data.doc.lnglat) ? e.data.doc.lnglat : undefined;
    case 'DeviceUpdated':
      if (isLngLat(e.data.set.lnglat)) return e.data.set.lnglat;
      return e.data.unset.includes('lnglat') ? null : undefined;
    case 'DeviceReported':
      // A report on a sub-topic nests its payload; only a top-level `lnglat` is the device's position.
      return e.data.path.length === 0 && isLngLat(e.data.payload.lnglat) ? e.data.payload.lnglat : undefined;
    default:
      return undefined;
  }
}

/**
 * The side effect of geofences: follows device position events from its own
 * checkpoint and, for each tracker whose fences the device crossed into or
 * out of, updates the tracker through the device decider and writes a log
 * entry on it. The trackers an asset may be leaving come from
 * `geofence_presence` (a read model of the trackers' `assetList`), so after
 * each crossing it waits for the read models before going on; when they do
 * not follow within `PROJECTION_WAIT_MS` the batch fails (a passing failure:
 * offered again after a pause, never set aside), since a later report of the
 * batch must find the tracker its asset may be leaving. A fence tracks only
 * what its owner (its creator) may: an enabled user who can read the asset and
 * write the tracker, checked at each report (`tracked`).
 *
 * Handling a batch again (after a crash, a failed batch, that timeout) changes
 * nothing: each report is decided as of itself, so a report at or before the
 * one behind the tracker's last crossing (`assetEventPosition`) decides nothing
 * (`domain/geofences/tracking.ts`); the tracker's update and its log entry
 * carry ids derived from the position event.
 */
export class GeofenceTracking {
  /** Its follower of the event log (its lag is measured from it). */
  readonly subscriber: CheckpointedSubscriber<Database>;

  /** The fences' owners' rights, cached until an event that may change them passes. */
  private readonly rights: OwnerRights;

  constructor(private readonly deps: ReactorDeps) {
    this.rights = new OwnerRights(deps.db, deps.principals, deps.projections);
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: CHECKPOINT,
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 500,
      cluster: deps.cluster ?? null,
      handle: async (batch) => {
        // A batch that changes rights: the read models hold the change before any fence's owner is checked.
        await this.rights.follow(batch);
        let worked = false;
        for (const event of batch) {
          const position = positionOf(event);
          if (position === undefined) continue;
          await this.handlePosition(event, position);
          worked = true;
        }
        return worked;
      },
      leading: {
        gained: async () => this.rights.clear(),
        lost: async () => {},
      },
    });
  }

  start(): Promise<void> {
    return this.subscriber.start();
  }

  stop(): Promise<void> {
    return this.subscriber.stop();
  }

  private async handlePosition(event: RecordedEvent, position: Point | null): Promise<void> {
    const assetId = (event.data as { id: string }).id;
    // The point from its coordinates alone: other members a report may carry (a GeoJSON `crs`) are not the platform's.
    const [lng, lat] = position ? [Number(position.coordinates[0]), Number(position.coordinates[1])] : [null, null];
    // Every fence of a tracker that counts for this report: those containing the point, and all fences of the trackers
    // that list the asset now (it may be leaving them), each with its owner, the fence's creator.
    const { rows: fences } = await sql<{ tracker: string; owner: string; inside: boolean }>`
      SELECT g.ref AS tracker, g.created_by AS owner,
             coalesce(${lng}::float8 IS NOT NULL AND ST_Contains(g.geom, ST_SetSRID(ST_MakePoint(${lng}::float8, ${lat}::float8), 4326)), false) AS inside
      FROM geofences g
      WHERE g.ref IS NOT NULL AND g.ref <> ${assetId}
        AND ((${lng}::float8 IS NOT NULL AND ST_Contains(g.geom, ST_SetSRID(ST_MakePoint(${lng}::float8, ${lat}::float8), 4326)))
          OR g.ref IN (SELECT p.tracker_id FROM geofence_presence p WHERE p.asset_id = ${assetId}))`.execute(this.deps.db);
    const rows = await this.tracked(fences, assetId);
    if (rows.length === 0) return;
    const asset = await this.assetOf(event, assetId, position);
    const context: CommandContext = { actor: ACTOR, correlationId: event.metadata.correlationId, causationId: event.id, now: asset.at };
    let last: Position | null = null;
    for (const { tracker, inside } of rows) {
      // Derived, so a repeat of this report's crossing is a no-op in the store.
      const updateId = causedId(event.id, ['track', event.id, tracker]);
      const handled = await handle(
        this.deps.store,
        deviceStream(tracker),
        trackerDecider,
        { type: 'TrackAsset', trackerId: tracker, report: asset, inside, at: asset.at },
        context,
        // From the tracker's read-model row: only the events after it are read, not the tracker's whole life.
        { retries: 5, eventIds: [updateId], from: await deviceAsRead(this.deps.db, tracker) },
      );
      const update = handled.events[0];
      let fields: { assetUpdate: AssetUpdate } | null = null;
      if (handled.result && update?.type === 'DeviceUpdated') fields = update.data.set as unknown as { assetUpdate: AssetUpdate };
      else if (handled.events.length === 0 && handled.state.status === 'active') fields = ownCrossing(handled.state.doc, event, assetId);
      if (!fields) continue;
      const log = logEvent(
        { resourceId: tracker, resourceType: 'device', type: 'info', priority: 'low', category: 'update', message: crossingMessage(fields), data: { assetUpdate: fields.assetUpdate } },
        asset.at,
        // Derived, so a batch handled again after a crash writes the same log entry, which the store then ignores.
        causedId(event.id, [event.id, tracker]),
      );
      const logged = await this.deps.store.append(logStream(tracker), [toNewEvent(log, context, log.data.id)], 'any');
      last = logged.position;
    }
    if (last) await this.deps.projections.waitFor(last, this.deps.config.projectionWaitMs);
  }

  /**
   * The trackers this report may change, and whether the asset is inside one of their fences now. A fence counts
   * only while its owner (its creator) is an enabled user who can read the asset and write the tracker, as the REST
   * API would let them; a tracker with no fence that counts is left as it is, so nothing of a device its fences'
   * owners may not read is ever written into it.
   */
  private async tracked(fences: { tracker: string; owner: string; inside: boolean }[], assetId: string): Promise<{ tracker: string; inside: boolean }[]> {
    const trackers = new Map<string, boolean>();
    const verdicts = new Map<string, boolean>();
    for (const fence of fences) {
      const key = `${fence.owner}/${fence.tracker}`;
      let counts = verdicts.get(key);
      if (counts === undefined) {
        const owner = await this.rights.owner(fence.owner);
        counts = owner !== null && (await this.rights.may(owner, assetId, 'read')) && (await this.rights.may(owner, fence.tracker, 'write'));
        verdicts.set(key, counts);
      }
      if (counts) trackers.set(fence.tracker, (trackers.get(fence.tracker) ?? false) || fence.inside);
    }
    return [...trackers].map(([tracker, inside]) => ({ tracker, inside }));
  }

  private async assetOf(event: RecordedEvent, id: string, position: Point | null): Promise<AssetReport> {
    const { rows } = await sql<{ name: string | null; tracker: boolean }>`
      SELECT (SELECT d.name FROM devices d WHERE d.id = ${id}) AS name,
             EXISTS (SELECT 1 FROM geofences g WHERE g.ref = ${id}) AS tracker`.execute(this.deps.db);
    const e = event as unknown as DeviceEvent;
    const at = e.type === 'DeviceReported' ? e.data.reportedAt : (e.data as { at: string }).at;
    const name = rows[0]?.name ?? (e.type === 'DeviceRegistered' ? String(e.data.doc.name ?? '') : '');
    return { id, name, position, at, isTracker: rows[0]?.tracker ?? false, event: event.position };
  }
}

/**
 * The tracker's last crossing when it is this report's own: the report is handled again after a crash between the
 * tracker's update and its log entry, so nothing was decided; the log entry is written (again, as a no-op if it was).
 */
const ownCrossing = (doc: DeviceDoc, event: RecordedEvent, assetId: string): { assetUpdate: AssetUpdate } | null => {
  const last = doc.assetUpdate as AssetUpdate | undefined;
  return doc.assetEventPosition === positionToString(event.position) && last?.assetId === assetId ? { assetUpdate: last } : null;
};
