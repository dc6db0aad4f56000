import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DEVICE_GROUP_NOT_FOUND, deviceGroupDecider, type DeviceGroupEvent } from '../../domain/devicegroups/deviceGroup.js';
import { ConflictError, NotFoundError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const groups = suite('device group decider');

const at = '2026-01-01T00:00:00.000Z';
const later = '2026-01-02T00:00:00.000Z';
const ID = '999999999999999999999999';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const [d1, d2, d3] = ['aaaaaaaaaaaaaaaaaaaaaaa1', 'aaaaaaaaaaaaaaaaaaaaaaa2', 'aaaaaaaaaaaaaaaaaaaaaaa3'] as const;

const given = (events: DeviceGroupEvent[]) => deciderSpec(deviceGroupDecider).given(events);
const created: DeviceGroupEvent = { type: 'DeviceGroupCreated', data: { id: ID, name: 'Hall 3', devices: [d1, d2], createdBy: owner, at } };
const deleted: DeviceGroupEvent = { type: 'DeviceGroupDeleted', data: { id: ID, at: later } };

groups('given no group, when it is created with a device listed twice, then DeviceGroupCreated lists each once, in the order first given', () => {
  given([]).when({ type: 'CreateDeviceGroup', id: ID, name: 'Hall 3', devices: [d1, d2, d1], createdBy: owner, at }).then([created]);
  assert.equal(given([created]).state, { status: 'active', id: ID, name: 'Hall 3', devices: [d1, d2] });
});

groups('given a group, live or deleted, when it is created again, then a conflict names it', () => {
  for (const events of [[created], [created, deleted]]) {
    given(events).when({ type: 'CreateDeviceGroup', id: ID, name: 'x', devices: [], createdBy: owner, at }).thenThrows(ConflictError, `Device group ${ID} already exists`);
  }
});

groups('given a group, when it is renamed, then DeviceGroupUpdated carries the name alone and the devices stay', () => {
  const renamed: DeviceGroupEvent = { type: 'DeviceGroupUpdated', data: { id: ID, name: 'Hall 4', at: later } };
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, name: 'Hall 4', at: later }).then([renamed]);
  assert.equal(given([created, renamed]).state, { status: 'active', id: ID, name: 'Hall 4', devices: [d1, d2] });
});

groups('given a group, when its devices are replaced, then DeviceGroupUpdated lists each once and the name stays', () => {
  const moved: DeviceGroupEvent = { type: 'DeviceGroupUpdated', data: { id: ID, devices: [d3, d1], at: later } };
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, devices: [d3, d1, d3], at: later }).then([moved]);
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, name: 'Hall 3', devices: [d3, d1], at: later }).then([moved]);
  assert.equal(given([created, moved]).state, { status: 'active', id: ID, name: 'Hall 3', devices: [d3, d1] });
  const emptied: DeviceGroupEvent = { type: 'DeviceGroupUpdated', data: { id: ID, devices: [], at: later } };
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, devices: [], at: later }).then([emptied]);
  assert.equal(given([created, emptied]).state, { status: 'active', id: ID, name: 'Hall 3', devices: [] });
});

groups('given a group, when an update names nothing or only the name it has, then no event', () => {
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, at: later }).then([]);
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, name: 'Hall 3', at: later }).then([]);
});

groups('given a group, when an update lists the devices it has, in its order, then no event', () => {
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, devices: [d1, d2], at: later }).then([]);
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, name: 'Hall 3', devices: [d1, d2, d1], at: later }).then([]);
});

groups('given a group, when an update lists its devices in another order, then DeviceGroupUpdated with that order', () => {
  given([created]).when({ type: 'UpdateDeviceGroup', id: ID, devices: [d2, d1], at: later }).then([{ type: 'DeviceGroupUpdated', data: { id: ID, devices: [d2, d1], at: later } }]);
});

groups('given a group, when it is deleted, then DeviceGroupDeleted', () => {
  given([created]).when({ type: 'DeleteDeviceGroup', id: ID, at: later }).then([deleted]);
});

groups('given no group or a deleted one, when it is updated or deleted, then Device group not found', () => {
  for (const events of [[], [created, deleted]]) {
    given(events).when({ type: 'UpdateDeviceGroup', id: ID, name: 'x', at: later }).thenThrows(NotFoundError, DEVICE_GROUP_NOT_FOUND);
    given(events).when({ type: 'UpdateDeviceGroup', id: ID, at: later }).thenThrows(NotFoundError, DEVICE_GROUP_NOT_FOUND);
    given(events).when({ type: 'DeleteDeviceGroup', id: ID, at: later }).thenThrows(NotFoundError, DEVICE_GROUP_NOT_FOUND);
  }
  assert.is(DEVICE_GROUP_NOT_FOUND, 'Device group not found');
});

groups.run();
