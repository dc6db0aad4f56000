import type { Decider } from '../shared/decider.js';
import { comparePositions, positionToString, type Position } from '../shared/events.js';
import { deviceDecider, type DeviceCommand, type DeviceDoc, type DeviceEvent, type DeviceState } from '../devices/device.js';

/**
 * Geofence tracking. A fence with a `ref` makes that device a tracker; every
 * other device is an asset to it. When an asset's position crosses the
 * boundary of the tracker's fences (inside any of them, or inside none), the
 * tracker's fields change:
 * - `assetUpdate`: the asset that crossed, with `assetState` `inside` or
 *   `outside` (where it is now) and `assetAccess` `enter` or `exit` (the
 *   crossing that happened);
 * - `assetList`: the assets inside now, each as it was when it entered
 *   (`assetAccess` `enter`, no `assetState`);
 * - `assets`, `trackers`: how many of the listed assets are plain devices and
 *   how many are themselves trackers;
 * - `prevReportedAt`: the `assetTimestamp` of the previous `assetUpdate`, left
 *   out on the first one;
 * - `assetEventPosition`: the place in the event log (`<commit>/<prepare>`, as
 *   the audit log's `position`) of the asset's event behind `assetUpdate`.
 * A report that stays on the same side changes nothing, so an asset moving
 * about inside a fence does not rewrite the tracker on every report.
 *
 * Reports are decided in the log's order, each as of itself: a report at or
 * before `assetEventPosition` was decided already (the tracker's last crossing
 * is its own or a later report's), so it changes nothing. Handling reports
 * again (tracking handles them at least once) then never decides an earlier
 * report against the tracker as a later one left it.
 */
export type AssetState = 'inside' | 'outside';
export type AssetAccess = 'enter' | 'exit';

export interface Asset {
  assetId: string;
  assetName: string;
  assetPosition: { type: 'Point'; coordinates: [number, number] } | null;
  assetTimestamp: string;
  assetIsGeofenceTracker: boolean;
  assetAccess: AssetAccess;
}

export interface AssetUpdate extends Asset {
  assetState: AssetState;
}

/** An asset's position report, as the tracking subscriber sees it. */
export interface AssetReport {
  id: string;
  name: string;
  /** Null when the device's position was removed: it is then inside no fence. */
  position: { type: 'Point'; coordinates: [number, number] } | null;
  at: string;
  isTracker: boolean;
  /** The place of the report's event in the event log. */
  event: Position;
}

export interface TrackerFields {
  assetUpdate: AssetUpdate;
  assetList: Asset[];
  assets: number;
  trackers: number;
  prevReportedAt?: string;
  assetEventPosition: string;
}

const isAsset = (v: unknown): v is Asset => typeof v === 'object' && v !== null && typeof (v as Asset).assetId === 'string';

/** The place in the event log of the report behind the tracker's last crossing; null when it has none (or a client wrote something else there). */
export function decidedThrough(tracker: DeviceDoc): Position | null {
  const value = tracker.assetEventPosition;
  const match = typeof value === 'string' ? /^(\d{1,30})\/(\d{1,30})$/.exec(value) : null;
  return match ? { commit: BigInt(match[1]!), prepare: BigInt(match[2]!) } : null;
}

/**
 * The tracker's new fields when the asset crossed a boundary; null when it stayed on the same side, or when the
 * tracker's last crossing came from this report or a later one (the report was decided already).
 */
export function track(tracker: DeviceDoc, report: AssetReport, inside: boolean): TrackerFields | null {
  const through = decidedThrough(tracker);
  if (through && comparePositions(report.event, through) <= 0) return null;
  const list = Array.isArray(tracker.assetList) ? tracker.assetList.filter(isAsset) : [];
  const listed = list.some((a) => a.assetId === report.id);
  if (inside === listed) return null;
  const asset: Asset = {
    assetId: report.id,
    assetName: report.name,
    assetPosition: report.position,
    assetTimestamp: report.at,
    assetIsGeofenceTracker: report.isTracker,
    assetAccess: inside ? 'enter' : 'exit',
  };
  const assetList = inside ? [...list, asset] : list.filter((a) => a.assetId !== report.id);
  const fields: TrackerFields = {
    assetUpdate: { ...asset, assetState: inside ? 'inside' : 'outside' },
    assetList,
    assets: assetList.filter((a) => !a.assetIsGeofenceTracker).length,
    trackers: assetList.filter((a) => a.assetIsGeofenceTracker).length,
    assetEventPosition: positionToString(report.event),
  };
  const previous = tracker.assetUpdate as Partial<AssetUpdate> | undefined;
  if (typeof previous?.assetTimestamp === 'string') fields.prevReportedAt = previous.assetTimestamp;
  return fields;
}

export type TrackCommand = { type: 'TrackAsset'; trackerId: string; report: AssetReport; inside: boolean; at: string };

/**
 * The tracker's side of a crossing, decided on the tracker device's own
 * stream and written through the device decider (`UpdateDevice`), so it is an
 * ordinary device change: read model, history, output topics and channels
 * follow as for any other. A tracker that is gone changes nothing.
 */
export const trackerDecider: Decider<TrackCommand, DeviceState, DeviceEvent> = {
  initialState: deviceDecider.initialState,
  evolve: deviceDecider.evolve,
  decide(command, state) {
    if (state.status !== 'active') return [];
    const fields = track(state.doc, command.report, command.inside);
    if (!fields) return [];
    const update: DeviceCommand = { type: 'UpdateDevice', id: command.trackerId, fields: { ...fields }, at: command.at };
    return deviceDecider.decide(update, state);
  },
};

/** The log line written on the tracker for a crossing. */
export const crossingMessage = (fields: Pick<TrackerFields, 'assetUpdate'>): string =>
  fields.assetUpdate.assetAccess === 'enter'
    ? `Asset ${fields.assetUpdate.assetName} (${fields.assetUpdate.assetId}) entered the geofence`
    : `Asset ${fields.assetUpdate.assetName} (${fields.assetUpdate.assetId}) left the geofence`;
