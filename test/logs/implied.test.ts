import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { impliedEntries } from '../../domain/logs/implied.js';
import { LOG_CATEGORIES, LOG_PRIORITIES, LOG_TYPES } from '../../domain/logs/logEntry.js';
import type { RecordedEvent } from '../../domain/shared/events.js';

const at = '2026-01-01T00:00:00.000Z';
const group = 'dddddddddddddddddddddddd';
const unit = { id: 'aaaaaaaaaaaaaaaaaaaaaaaa', name: 'Acme Sales' };
const parent = { id: 'bbbbbbbbbbbbbbbbbbbbbbbb', name: 'Acme' };
const user = '0b7c5a1e-2d3f-4a5b-8c6d-7e8f9a0b1c2d';
let n = 0;
const recorded = (streamId: string, type: string, data: Record<string, unknown>): RecordedEvent => ({
  id: `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`,
  streamId,
  type,
  data: { ...data, at },
  revision: 0,
  metadata: { actor: user, correlationId: 'c', time: at },
  position: { commit: 1n, prepare: BigInt(n) },
});

const test = suite('log entries implied by usergroup and organization events');

test('given each usergroup and organization event, then its entries use the logs widget\'s resource types, types, priorities and categories', () => {
  const events = [
    recorded(`usergroup-${group}`, 'UsergroupCreated', { id: group, name: 'Drivers', owner: user, createdBy: user }),
    recorded(`usergroup-${group}`, 'UsergroupUpdated', { id: group, changes: { name: 'Vans', owner: user }, ownerUsername: 'mia' }),
    recorded(`usergroup-${group}`, 'UsergroupMemberAdded', { id: group, userId: user, username: 'mia' }),
    recorded(`usergroup-${group}`, 'UsergroupMemberRemoved', { id: group, userId: user }),
    recorded(`usergroup-${group}`, 'UsergroupAppFilterSet', { id: group, appIds: [] }),
    recorded(`usergroup-${group}`, 'UsergroupAppAllowed', { id: group, appId: unit.id }),
    recorded(`usergroup-${group}`, 'UsergroupAppDisallowed', { id: group, appId: unit.id }),
    recorded(`usergroup-${group}`, 'UsergroupAppFilterRemoved', { id: group }),
    recorded(`organization-${unit.id}`, 'OrganizationCreated', { ...unit, parent, createdBy: user }),
    recorded(`organization-${unit.id}`, 'OrganizationUpdated', { ...unit, parent: null, moved: true }),
    recorded(`organization-${unit.id}`, 'OrganizationUpdated', { ...unit, parent: null, moved: false, description: 'd' }),
    recorded(`user-${user}`, 'UserCreated', { id: user, profile: { username: 'mia', enabled: true, requiredActions: [], attributes: {} }, passwordHash: 'h', organization: unit }),
    recorded(`user-${user}`, 'UserJoinedOrganization', { id: user, username: 'mia', organization: unit }),
    recorded(`user-${user}`, 'UserLeftOrganization', { id: user, username: 'mia', organization: unit }),
    recorded(`user-${user}`, 'PasswordReset', { id: user, passwordHash: 'h', organization: unit, username: 'mia' }),
  ];
  const entries = events.flatMap(impliedEntries);
  assert.is(entries.length, events.length + 2, 'one entry per event, two for the rename with a new owner and two for a sub-unit');
  for (const e of entries) {
    assert.ok(['userGroup', 'organization'].includes(e.resourceType), e.resourceType);
    assert.ok((LOG_TYPES as readonly string[]).includes(e.type), e.type);
    assert.ok((LOG_PRIORITIES as readonly string[]).includes(e.priority), e.priority);
    assert.ok((LOG_CATEGORIES as readonly string[]).includes(e.category), e.category);
    assert.match(e.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$|^00000000-/);
  }
  assert.is(new Set(entries.map((e) => e.id)).size, entries.length, 'every entry has an id of its own');
  assert.equal(events.flatMap(impliedEntries), entries, 'derived again, the same entries');
  const messages = entries.map((e) => e.message);
  for (const m of ['Member mia (' + user + ') added', `Member ${user} removed`, 'Owner changed to mia (' + user + ')', 'Sub-unit Acme Sales created', 'Moved to the top of the tree', 'Member mia (' + user + ') created', 'Password of member mia (' + user + ') reset']) {
    assert.ok(messages.includes(m), `"${m}" among ${JSON.stringify(messages)}`);
  }
  const subUnit = entries.find((e) => e.message === 'Sub-unit Acme Sales created')!;
  assert.is(subUnit.resourceId, parent.id, 'a sub-unit is logged on its parent too');
});

test('given a deletion, a user created by no unit or a plain password reset, then no entry', () => {
  assert.equal(impliedEntries(recorded(`usergroup-${group}`, 'UsergroupDeleted', { id: group })), []);
  assert.equal(impliedEntries(recorded(`organization-${unit.id}`, 'OrganizationDeleted', { ...unit })), []);
  assert.equal(impliedEntries(recorded(`user-${user}`, 'UserCreated', { id: user, profile: { username: 'x', enabled: true, requiredActions: [], attributes: {} }, passwordHash: 'h' })), []);
  assert.equal(impliedEntries(recorded(`user-${user}`, 'PasswordReset', { id: user, passwordHash: 'h' })), []);
  assert.equal(impliedEntries(recorded('device-x', 'DeviceReported', { id: 'x' })), []);
});

test.run();
