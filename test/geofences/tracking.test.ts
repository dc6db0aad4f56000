import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { track, trackerDecider, type AssetReport } from '../../domain/geofences/tracking.js';
import type { DeviceEvent, DeviceState } from '../../domain/devices/device.js';

const tracking = suite('geofence tracking decider');

/** Each report a later event in the log than the one before, as the tracking reactor sees them. */
let logged = 100n;
const report = (over: Partial<AssetReport> = {}): AssetReport => ({
  id: 'a'.repeat(24),
  name: 'forklift',
  position: { type: 'Point', coordinates: [13.4, 52.5] },
  at: '2024-05-01T10:00:00.000Z',
  isTracker: false,
  event: { commit: ++logged, prepare: logged },
  ...over,
});

tracking('given an empty tracker, when an asset reports inside, then it enters: listed, counted, assetUpdate inside', () => {
  const fields = track({ name: 'gate' }, report(), true)!;
  assert.equal(fields.assetUpdate, {
    assetId: 'a'.repeat(24),
    assetName: 'forklift',
    assetPosition: { type: 'Point', coordinates: [13.4, 52.5] },
    assetTimestamp: '2024-05-01T10:00:00.000Z',
    assetIsGeofenceTracker: false,
    assetAccess: 'enter',
    assetState: 'inside',
  });
  assert.equal(fields.assetList.map((a) => a.assetId), ['a'.repeat(24)]);
  assert.is('assetState' in fields.assetList[0]!, false, 'assetState appears only in assetUpdate');
  assert.is(fields.assets, 1);
  assert.is(fields.trackers, 0);
  assert.is(fields.prevReportedAt, undefined);
});

tracking('given an asset inside, when it reports inside again, then nothing changes', () => {
  const entered = track({}, report(), true)!;
  assert.is(track({ ...entered }, report({ at: '2024-05-01T10:05:00.000Z' }), true), null);
});

tracking('given an asset outside, when it reports outside again, then nothing changes', () => {
  assert.is(track({}, report(), false), null);
});

tracking('given an asset inside, when it reports outside, then it exits: unlisted, assetUpdate outside, prevReportedAt set', () => {
  const entered = track({}, report(), true)!;
  const left = track({ ...entered }, report({ at: '2024-05-01T11:00:00.000Z', position: { type: 'Point', coordinates: [0, 0] } }), false)!;
  assert.is(left.assetUpdate.assetState, 'outside');
  assert.is(left.assetUpdate.assetAccess, 'exit');
  assert.equal(left.assetUpdate.assetPosition, { type: 'Point', coordinates: [0, 0] });
  assert.equal(left.assetList, []);
  assert.is(left.assets, 0);
  assert.is(left.prevReportedAt, '2024-05-01T10:00:00.000Z');
});

tracking('given two assets, one of them a tracker, when both enter, then assets and trackers count them apart', () => {
  const one = track({}, report(), true)!;
  const two = track({ ...one }, report({ id: 'b'.repeat(24), name: 'gate 2', isTracker: true }), true)!;
  assert.is(two.assets, 1);
  assert.is(two.trackers, 1);
  assert.equal(two.assetList.map((a) => a.assetId), ['a'.repeat(24), 'b'.repeat(24)]);
});

tracking('given a position removed, when the asset was inside, then it exits with a null position', () => {
  const entered = track({}, report(), true)!;
  const left = track({ ...entered }, report({ position: null }), false)!;
  assert.is(left.assetUpdate.assetState, 'outside');
  assert.is(left.assetUpdate.assetPosition, null);
});

const active = (doc: Record<string, unknown>): DeviceState => ({ status: 'active', id: 't'.repeat(24), doc, createdBy: 'u', credentialsSetId: null, claimedBy: [] });

tracking('when the tracker decider sees a crossing, then it emits the device update with the tracker fields', () => {
  const events = trackerDecider.decide({ type: 'TrackAsset', trackerId: 't'.repeat(24), report: report(), inside: true, at: '2024-05-01T10:00:01.000Z' }, active({ name: 'gate' }));
  assert.is(events.length, 1);
  const event = events[0] as Extract<DeviceEvent, { type: 'DeviceUpdated' }>;
  assert.is(event.type, 'DeviceUpdated');
  assert.equal(Object.keys(event.data.set).sort(), ['assetEventPosition', 'assetList', 'assetUpdate', 'assets', 'trackers']);
});

tracking('when the tracker is deleted or missing, then the decider emits nothing', () => {
  const command = { type: 'TrackAsset' as const, trackerId: 't'.repeat(24), report: report(), inside: true, at: '2024-05-01T10:00:01.000Z' };
  assert.equal(trackerDecider.decide(command, { status: 'deleted' }), []);
  assert.equal(trackerDecider.decide(command, { status: 'none' }), []);
});

tracking('given a crossing, then the tracker keeps the place in the log of the report that decided it', () => {
  const fields = track({}, report({ event: { commit: 7n, prepare: 42n } }), true)!;
  assert.is(fields.assetEventPosition, '7/42');
});

tracking('given an asset that entered and later left, when the report that entered or an earlier one is decided again, then nothing changes', () => {
  const entering = report();
  const stillInside = report({ at: '2024-05-01T10:05:00.000Z' });
  const leaving = report({ at: '2024-05-01T11:00:00.000Z', position: { type: 'Point', coordinates: [0, 0] } });
  const entered = track({}, entering, true)!;
  assert.is(track({ ...entered }, stillInside, true), null);
  const left = { ...entered, ...track({ ...entered }, leaving, false)! };
  assert.is(track(left, stillInside, true), null, 'a report before the exit is not decided against the tracker the exit left');
  assert.is(track(left, entering, true), null);
  assert.is(track(left, leaving, false), null, 'the exit itself was decided');
});

tracking('given an asset that left, when another asset crosses later, then a report of the first from before its exit still changes nothing', () => {
  const entered = track({}, report(), true)!;
  const stillInside = report({ at: '2024-05-01T10:05:00.000Z' });
  assert.is(track({ ...entered }, stillInside, true), null);
  const left = { ...entered, ...track({ ...entered }, report({ position: null }), false)! };
  const other = { ...left, ...track(left, report({ id: 'b'.repeat(24) }), true)! };
  assert.is(track(other, stillInside, true), null);
});

tracking('given a tracker whose assetEventPosition a client set to something else, when an asset crosses, then it is decided', () => {
  const fields = track({ assetEventPosition: 'somewhere' }, report(), true)!;
  assert.is(fields.assetUpdate.assetAccess, 'enter');
});

tracking.run();
