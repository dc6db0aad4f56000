import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { deciderSpec } from '../support/decider.js';
import { deviceGroupDecider, type DeviceGroupEvent } from '../../domain/devicegroups/deviceGroup.js';
import { NotFoundError } from '../../domain/shared/errors.js';
import { LIVE_NAME } from '../../api/channels/live.js';

/** A user's live channel under concurrent calls: one group, one channel, and every add kept. */
const live = suite<{ t: TestPlatform }>('live channel: concurrent calls');

live.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
live.after(async (ctx) => {
  await ctx.t?.stop();
});

const add = (t: TestPlatform, user: GivenUser, devices: string[]) => t.call('POST', '/api/live-channel/devices', { token: user.token, body: { devices } });

/** Devices the user created, and so can read. */
async function givenDevices(t: TestPlatform, user: GivenUser, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const res = await t.call('POST', '/api/iotnodes', { token: user.token, body: { name: `live ${i}` } });
    assert.is(res.status, 201, res.text);
    ids.push(res.body._id);
  }
  return ids;
}

/** The user's live groups and channels as the read models hold them. */
async function liveOf(t: TestPlatform, user: GivenUser) {
  const db = t.platform.deps.db;
  const groups = await db.selectFrom('device_groups').select('id').where('created_by', '=', user.id).where('name', '=', LIVE_NAME).execute();
  const channels = await db.selectFrom('channels').select('id').where('created_by', '=', user.id).where('device_group', 'is not', null).execute();
  return { groups: groups.map((g) => g.id), channels: channels.map((c) => c.id) };
}

live('given a user without a live channel, when two first calls arrive at once, then both answer the same group and channel, and the user has one of each', async ({ t }) => {
  const user = await givenUser(t, 'live-first', { attributes: { roles: ['admin'] } });
  const [a, b] = await givenDevices(t, user, 2);
  const [one, two] = await Promise.all([add(t, user, [a!]), add(t, user, [b!])]);
  assert.equal([one.status, two.status].sort(), [200, 201], `${one.text} ${two.text}`);
  assert.is(one.body.deviceGroupId, two.body.deviceGroupId);
  assert.is(one.body.channelId, two.body.channelId);
  assert.equal(await liveOf(t, user), { groups: [one.body.deviceGroupId], channels: [one.body.channelId] });
  assert.equal((await t.call('GET', '/api/live-channel', { token: user.token })).body.devices.sort(), [a, b].sort());
});

live('given a live channel, when four devices are added at once, then every one is in it', async ({ t }) => {
  const user = await givenUser(t, 'live-adds', { attributes: { roles: ['admin'] } });
  const [first, ...others] = await givenDevices(t, user, 5);
  assert.is((await add(t, user, [first!])).status, 201);
  const answers = await Promise.all(others.map((id) => add(t, user, [id])));
  assert.equal(answers.map((r) => r.status), [200, 200, 200, 200]);
  const now = await t.call('GET', '/api/live-channel', { token: user.token });
  assert.equal(now.body.devices.sort(), [first, ...others].sort());
});

live('given a user who deleted its live group and channel, when devices are added, then a new group and channel take them', async ({ t }) => {
  const user = await givenUser(t, 'live-again', { attributes: { roles: ['admin'] } });
  const [a, b] = await givenDevices(t, user, 2);
  const first = await add(t, user, [a!]);
  assert.is(first.status, 201);
  assert.is((await t.call('DELETE', `/api/channels/${first.body.channelId}`, { token: user.token })).status, 204);
  assert.is((await t.call('DELETE', `/api/devicegroups/${first.body.deviceGroupId}`, { token: user.token })).status, 204);
  const again = await add(t, user, [b!]);
  assert.is(again.status, 201, again.text);
  assert.not.equal([again.body.deviceGroupId, again.body.channelId], [first.body.deviceGroupId, first.body.channelId]);
  assert.equal(again.body.devices, [b]);
  assert.equal(await liveOf(t, user), { groups: [again.body.deviceGroupId], channels: [again.body.channelId] });
});

const at = '2024-05-01T12:00:00.000Z';
const ID = '333333333333333333333333';
const given = (events: DeviceGroupEvent[]) => deciderSpec(deviceGroupDecider).given(events);
const created = (devices: string[], name = LIVE_NAME): DeviceGroupEvent => ({ type: 'DeviceGroupCreated', data: { id: ID, name, devices, createdBy: 'u', at } });

live('given a group, when devices are added, then the new ones follow those it holds, and the earliest leave past the limit', () => {
  given([created(['a', 'b'])])
    .when({ type: 'AddDevices', id: ID, devices: ['b', 'c', 'd', 'c'], keepAtMost: 3, at })
    .then([{ type: 'DeviceGroupUpdated', data: { id: ID, devices: ['b', 'c', 'd'], at } }]);
  given([created(['a', 'b'])]).when({ type: 'AddDevices', id: ID, devices: ['a'], at }).then([]);
});

live('given no group, when devices are added with a name to create it by, then it is created; a deleted or renamed one is not found', () => {
  const create = { name: LIVE_NAME, createdBy: 'u' };
  given([]).when({ type: 'AddDevices', id: ID, devices: ['a', 'b', 'c'], keepAtMost: 2, create, at }).then([created(['b', 'c'])]);
  given([]).when({ type: 'AddDevices', id: ID, devices: ['a'], at }).thenThrows(NotFoundError);
  given([created([]), { type: 'DeviceGroupDeleted', data: { id: ID, at } }]).when({ type: 'AddDevices', id: ID, devices: ['a'], create, at }).thenThrows(NotFoundError);
  given([created([], 'mine now')]).when({ type: 'AddDevices', id: ID, devices: ['a'], create, at }).thenThrows(NotFoundError);
});

live.run();
