import { suite } from 'uvu';
import { appDecider, type AppEvent } from '../../domain/apps/app.js';
import { usergroupDecider, MAX_FILTER_APPS, type UsergroupEvent } from '../../domain/usergroups/usergroup.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const creator = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const at = '2026-01-01T00:00:00.000Z';
const created: AppEvent = { type: 'AppCreated', data: { id, name: 'Dispatch', secretHash: 'scrypt$1$2', createdBy: creator, at } };
const app = (events: AppEvent[]) => deciderSpec(appDecider).given(events);

const test = suite('apps and app filter deciders');

test('given nothing, when an app is created, then AppCreated with the secret hash only; a second create conflicts', () => {
  app([]).when({ type: 'CreateApp', id, name: 'Dispatch', secretHash: 'scrypt$1$2', createdBy: creator, at }).then([created]);
  app([created]).when({ type: 'CreateApp', id, name: 'Dispatch', secretHash: 'x', createdBy: creator, at }).thenThrows(ConflictError);
});

test('given an app, when it is sent unchanged, then no event; renamed, then AppUpdated; a new secret, then AppSecretRotated', () => {
  app([created]).when({ type: 'UpdateApp', id, name: 'Dispatch', at }).then([]);
  app([created]).when({ type: 'UpdateApp', id, name: 'Dispatch 2', description: 'Vans', at }).then([{ type: 'AppUpdated', data: { id, name: 'Dispatch 2', description: 'Vans', at } }]);
  app([created]).when({ type: 'RotateAppSecret', id, secretHash: 'scrypt$3$4', at }).then([{ type: 'AppSecretRotated', data: { id, secretHash: 'scrypt$3$4', at } }]);
});

test('given a deleted app or none, when anything but a create arrives, then not found', () => {
  const deleted: AppEvent = { type: 'AppDeleted', data: { id, at } };
  app([created]).when({ type: 'DeleteApp', id, at }).then([deleted]);
  for (const history of [[], [created, deleted]]) {
    app(history).when({ type: 'DeleteApp', id, at }).thenThrows(NotFoundError, 'App not found');
    app(history).when({ type: 'RotateAppSecret', id, secretHash: 'x', at }).thenThrows(NotFoundError);
  }
});

// ---- app filter, on the usergroup's stream ----
const groupId = 'dddddddddddddddddddddddd';
const a = '111111111111111111111111';
const b = '222222222222222222222222';
const groupCreated: UsergroupEvent = { type: 'UsergroupCreated', data: { id: groupId, name: 'Drivers', owner: creator, createdBy: creator, at } };
const group = (events: UsergroupEvent[]) => deciderSpec(usergroupDecider).given(events);
const filterSet = (appIds: string[]): UsergroupEvent => ({ type: 'UsergroupAppFilterSet', data: { id: groupId, appIds, at } });

test('given a group without a filter, when one app is allowed, then the filter is on with that app alone', () => {
  group([groupCreated]).when({ type: 'AllowApp', id: groupId, appId: a, at }).then([{ type: 'UsergroupAppAllowed', data: { id: groupId, appId: a, at } }]);
  const state = group([groupCreated, { type: 'UsergroupAppAllowed', data: { id: groupId, appId: a, at } }]).state;
  if (state.status !== 'active' || JSON.stringify(state.appFilter) !== JSON.stringify([a])) throw new Error(`filter ${JSON.stringify(state)}`);
});

test('given a filter, when the same set is set again or an allowed app allowed again, then no event; repeats count once', () => {
  group([groupCreated]).when({ type: 'SetAppFilter', id: groupId, appIds: [a, b, a], at }).then([filterSet([a, b])]);
  group([groupCreated, filterSet([a, b])]).when({ type: 'SetAppFilter', id: groupId, appIds: [b, a], at }).then([]);
  group([groupCreated, filterSet([a])]).when({ type: 'AllowApp', id: groupId, appId: a, at }).then([]);
});

test('given a group, when an empty filter is set, then it is on and lets nothing through; removing it turns it off, once', () => {
  group([groupCreated]).when({ type: 'SetAppFilter', id: groupId, appIds: [], at }).then([filterSet([])]);
  const removed: UsergroupEvent = { type: 'UsergroupAppFilterRemoved', data: { id: groupId, at } };
  group([groupCreated, filterSet([])]).when({ type: 'RemoveAppFilter', id: groupId, at }).then([removed]);
  group([groupCreated, filterSet([]), removed]).when({ type: 'RemoveAppFilter', id: groupId, at }).then([]);
});

test('given a filter, when an app it does not list is removed, then not found; one it lists, then UsergroupAppDisallowed', () => {
  group([groupCreated, filterSet([a])]).when({ type: 'DisallowApp', id: groupId, appId: b, at }).thenThrows(NotFoundError, 'App not in the filter');
  group([groupCreated]).when({ type: 'DisallowApp', id: groupId, appId: a, at }).thenThrows(NotFoundError);
  group([groupCreated, filterSet([a])]).when({ type: 'DisallowApp', id: groupId, appId: a, at }).then([{ type: 'UsergroupAppDisallowed', data: { id: groupId, appId: a, at } }]);
});

test(`given a group, when a filter would list more than ${MAX_FILTER_APPS} apps, then 422`, () => {
  const many = Array.from({ length: MAX_FILTER_APPS + 1 }, (_, i) => i.toString(16).padStart(24, '0'));
  group([groupCreated]).when({ type: 'SetAppFilter', id: groupId, appIds: many, at }).thenThrows(ValidationError, /^ERR - appIds /);
  group([groupCreated, filterSet(many.slice(0, MAX_FILTER_APPS))]).when({ type: 'AllowApp', id: groupId, appId: many[MAX_FILTER_APPS]!, at }).thenThrows(ValidationError, /^ERR - appId /);
});

test('given a group, when a member is added or removed, then the event carries the username for the log', () => {
  const member = '0b7c5a1e-2d3f-4a5b-8c6d-7e8f9a0b1c2d';
  const added: UsergroupEvent = { type: 'UsergroupMemberAdded', data: { id: groupId, userId: member, username: 'mia', at } };
  group([groupCreated]).when({ type: 'AddMember', id: groupId, userId: member, username: 'mia', at }).then([added]);
  group([groupCreated, added])
    .when({ type: 'RemoveMember', id: groupId, userId: member, username: 'mia', at })
    .then([{ type: 'UsergroupMemberRemoved', data: { id: groupId, userId: member, username: 'mia', at } }]);
});

test.run();
