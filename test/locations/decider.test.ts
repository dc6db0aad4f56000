import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { locationDecider, type Location, type LocationEvent } from '../../domain/locations/location.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const given = (events: LocationEvent[]) => deciderSpec(locationDecider).given(events);

const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const device = 'bbbbbbbbbbbbbbbbbbbbbbbb';
const user = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const at = '2026-01-01T00:00:00.000Z';
const location: Location = {
  name: 'Kontor Östra_1-B',
  user,
  lat: 59.33,
  lng: 18.06,
  defaultLayer: { name: 'Plan 1', image: '/img/plan1.png', left: 0, top: 100, width: 50, height: 200, items: [{ deviceId: device, top: 10, left: 20 }] },
  layers: [{ name: 'Källare', items: [] }],
};
const created: LocationEvent = { type: 'LocationCreated', data: { id, createdBy: user, location, at } };
const create = (l: Location) => ({ type: 'CreateLocation' as const, id, createdBy: user, location: l, at });

const test = suite('locations decider');

test('given nothing, when a location with letters, digits, åäöÅÄÖ, spaces, underscores and hyphens is created, then LocationCreated', () => {
  given([]).when(create(location)).then([created]);
});

test('given nothing, when the name has any other character, then 422 with "is not a valid location name" and no event', () => {
  for (const name of ['Café', 'Room/1', 'a.b', 'tab\there', 'x!', '', 'émoji 😀', 'Straße']) {
    given([]).when(create({ ...location, name })).thenThrows(ValidationError, /^ERR - name is not a valid location name/);
  }
});

test('given nothing, when a layer name has another character, then the message names that layer', () => {
  given([]).when(create({ ...location, defaultLayer: { name: 'Plan#1' } })).thenThrows(ValidationError, /^ERR - defaultLayer\.name is not a valid location name/);
  given([]).when(create({ ...location, layers: [{ name: 'ok' }, { name: 'nö?' }] })).thenThrows(ValidationError, /^ERR - layers\.1\.name is not a valid location name/);
});

test('given nothing, when an ä comes as a plus a combining diaeresis, then it is the same ä, stored composed', () => {
  const [event] = given([]).when(create({ ...location, name: 'Ka\u0308llare' })).events() as [LocationEvent & { type: 'LocationCreated' }];
  assert.is(event.data.location.name, 'Källare');
});

test('given nothing, when a layer is placed outside 0–100 or sized outside 50–200, then 422 naming the field', () => {
  const cases: [Partial<Location['defaultLayer']>, RegExp][] = [
    [{ left: -1 }, /^ERR - defaultLayer\.left must be between 0 and 100$/],
    [{ top: 100.5 }, /^ERR - defaultLayer\.top must be between 0 and 100$/],
    [{ width: 49 }, /^ERR - defaultLayer\.width must be between 50 and 200$/],
    [{ height: 201 }, /^ERR - defaultLayer\.height must be between 50 and 200$/],
  ];
  for (const [layer, message] of cases) given([]).when(create({ ...location, defaultLayer: layer })).thenThrows(ValidationError, message);
  given([]).when(create({ ...location, layers: [{ width: 300 }] })).thenThrows(ValidationError, /^ERR - layers\.0\.width /);
});

test('given nothing, when an item has no deviceId, then 422 naming the item', () => {
  const items = [{ deviceId: device }, { top: 3 }] as never;
  given([]).when(create({ ...location, layers: [{ items }] })).thenThrows(ValidationError, /^ERR - layers\.0\.items\.1\.deviceId is required$/);
});

test('given a location, when it is created again, then a conflict', () => {
  given([created]).when(create(location)).thenThrows(ConflictError);
});

test('given a location, when it is replaced, then LocationReplaced with the new location; the same rules apply', () => {
  const next = { ...location, name: 'Lager' };
  given([created]).when({ type: 'ReplaceLocation', id, location: next, at }).then([{ type: 'LocationReplaced', data: { id, location: next, at } }]);
  given([created]).when({ type: 'ReplaceLocation', id, location: { ...next, name: 'Lager?' }, at }).thenThrows(ValidationError, /is not a valid location name/);
});

test('given no location or a deleted one, when it is replaced or deleted, then not found', () => {
  const deleted: LocationEvent = { type: 'LocationDeleted', data: { id, at } };
  given([created]).when({ type: 'DeleteLocation', id, at }).then([deleted]);
  for (const history of [[], [created, deleted]]) {
    given(history).when({ type: 'DeleteLocation', id, at }).thenThrows(NotFoundError, 'Location not found');
    given(history).when({ type: 'ReplaceLocation', id, location, at }).thenThrows(NotFoundError);
  }
});

test.run();
