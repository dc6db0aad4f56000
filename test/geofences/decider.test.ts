import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { GEOFENCE_NOT_FOUND, geofenceDecider, type GeofenceEvent, type GeofenceFields } from '../../domain/geofences/geofence.js';
import type { Polygon } from '../../domain/geofences/fence.js';
import { ConflictError, NotFoundError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const geofences = suite('geofence decider');

const at = '2026-01-01T00:00:00.000Z';
const later = '2026-01-02T00:00:00.000Z';
const ID = '777777777777777777777777';
const device = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const box = (w: number, s: number, e: number, n: number): Polygon => ({ type: 'Polygon', coordinates: [[[w, s], [e, s], [e, n], [w, n], [w, s]]] });

const linked: GeofenceFields = { fence: box(1, 1, 2, 2), ref: device, refType: 'device' };
const unlinked: GeofenceFields = { fence: box(3, 3, 4, 4), ref: null, refType: null };
const created: GeofenceEvent = { type: 'GeofenceCreated', data: { id: ID, ...linked, createdBy: owner, at } };
const replaced: GeofenceEvent = { type: 'GeofenceReplaced', data: { id: ID, ...unlinked, at: later } };
const deleted: GeofenceEvent = { type: 'GeofenceDeleted', data: { id: ID, at: later } };

const given = (events: GeofenceEvent[]) => deciderSpec(geofenceDecider).given(events);

geofences('given no geofence, when it is created, then GeofenceCreated, and it was created and last updated at the same time', () => {
  given([]).when({ type: 'CreateGeofence', id: ID, fields: linked, createdBy: owner, at }).then([created]);
  assert.equal(given([created]).state, { status: 'active', id: ID, ...linked, createdBy: owner, createdAt: at, updatedAt: at });
});

geofences('given a geofence, live or deleted, when it is created again, then a conflict names it', () => {
  for (const events of [[created], [created, deleted]]) {
    given(events).when({ type: 'CreateGeofence', id: ID, fields: unlinked, createdBy: owner, at }).thenThrows(ConflictError, `Geofence ${ID} already exists`);
  }
});

geofences('given a linked geofence, when it is replaced by an unlinked fence, then GeofenceReplaced; the link goes, updatedAt moves, creator and createdAt stay', () => {
  given([created]).when({ type: 'ReplaceGeofence', id: ID, fields: unlinked, at: later }).then([replaced]);
  assert.equal(given([created, replaced]).state, { status: 'active', id: ID, ...unlinked, createdBy: owner, createdAt: at, updatedAt: later });
});

geofences('given a geofence, when it is deleted, then GeofenceDeleted', () => {
  given([created, replaced]).when({ type: 'DeleteGeofence', id: ID, at: later }).then([deleted]);
});

geofences('given no geofence or a deleted one, when it is replaced or deleted, then Geofence not found', () => {
  for (const events of [[], [created, deleted]]) {
    given(events).when({ type: 'ReplaceGeofence', id: ID, fields: unlinked, at: later }).thenThrows(NotFoundError, GEOFENCE_NOT_FOUND);
    given(events).when({ type: 'DeleteGeofence', id: ID, at: later }).thenThrows(NotFoundError, GEOFENCE_NOT_FOUND);
  }
  assert.is(GEOFENCE_NOT_FOUND, 'Geofence not found');
});

geofences('given a deleted geofence, when a replacement is folded after the deletion, then it stays deleted', () => {
  assert.equal(given([created, deleted, replaced]).state, { status: 'deleted' });
});

geofences('given a geofence, when it is replaced with the fields it has, then no event (its updatedAt stays)', () => {
  given([created]).when({ type: 'ReplaceGeofence', id: ID, fields: structuredClone(linked), at: later }).then([]);
});

geofences.run();
