import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { receiver } from '../support/receiver.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { connectMqtt, eventually, projected } from './support.js';

/**
 * A channel exports a device's changes only while its creator may read the
 * device: the rights are checked when the channel is created and again at
 * every delivery, so a revoked right, a disabled or a deleted creator, or a
 * device of a group the creator may not read, stops the export. Each stop
 * and each return is logged on the channel once, not per message.
 */
const rights = suite<{ t: TestPlatform; alice: GivenUser }>('channels deliver only what their creator may read');

rights.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
  const role = await ctx.t.call('POST', '/api/roles', { body: { name: 'tenant', permissions: { device: all, deviceGroup: all, channel: all, credentialsSet: all, accessRight: all, log: ['GET'] } } });
  assert.is(role.status, 201, role.text);
  ctx.alice = await tenant(ctx.t, 'alice');
});
rights.after(async (ctx) => {
  await ctx.t.stop();
});

const tenant = (t: TestPlatform, username: string) => givenUser(t, username, { attributes: { roles: ['tenant'] } });

async function created(t: TestPlatform, owner: GivenUser, path: string, body: Record<string, unknown>): Promise<string> {
  const res = await t.call('POST', path, { token: owner.token, body });
  assert.is(res.status, 201, res.text);
  return res.body._id;
}

async function update(t: TestPlatform, owner: GivenUser, id: string, fields: Record<string, unknown>): Promise<void> {
  const res = await t.call('PUT', `/api/iotnodes/${id}`, { token: owner.token, body: fields });
  assert.is(res.status, 200, res.text);
}

async function share(t: TestPlatform, owner: GivenUser, resourceType: string, resourceId: string, subjectId: string, scope: string[]): Promise<void> {
  const res = await t.call('POST', '/api/access-rights', { token: owner.token, body: { resourceType, resourceId, subjectType: 'user', subjectId, scope } });
  assert.ok(res.status < 300, res.text);
}

async function unshare(t: TestPlatform, owner: GivenUser, resourceType: string, resourceId: string, subjectId: string): Promise<void> {
  const res = await t.call('DELETE', '/api/access-rights', { token: owner.token, body: { resourceType, resourceId, subjectType: 'user', subjectId } });
  assert.ok(res.status < 300, res.text);
}

/** A credentials set of `owner` and a consumer logged in with it, collecting every message on its output topics. */
async function consumer(t: TestPlatform, owner: GivenUser, username: string): Promise<{ setId: string; client: MqttClient; got: { topic: string; body: any }[] }> {
  const setId = await created(t, owner, '/api/basic-credentials-sets', { username, password: `${username}-password` });
  const client = await connectMqtt(t, username, `${username}-password`);
  const got: { topic: string; body: any }[] = [];
  client.on('message', (topic, payload) => got.push({ topic, body: JSON.parse(payload.toString()) }));
  await client.subscribeAsync(`svc/output/v2/${setId}/#`, { qos: 1 });
  return { setId, client, got };
}

/** The channel's log entries, oldest first, from the read model. */
async function channelLog(t: TestPlatform, channelId: string): Promise<{ type: string; category: string; message: string; data: any }[]> {
  await projected(t);
  const rows = await t.platform.deps.db.selectFrom('device_logs').select(['type', 'category', 'message', 'data']).where('resource_id', '=', channelId).orderBy('time').orderBy('id').execute();
  return rows as { type: string; category: string; message: string; data: any }[];
}

const notes = (got: { topic: string; body: any }[], deviceId: string) => got.filter((m) => m.body.iotnode?._id === deviceId && m.body.diff?.note !== undefined).map((m) => m.body.diff.note);

rights('given Bob\'s mqtt channel on a device Alice shared with him, when Alice revokes his right, then her next changes are not published, the channel logs it once, and publishing resumes once she shares it again', async ({ t, alice }) => {
  const bob = await tenant(t, 'bob');
  const out = await consumer(t, alice, 'alice-out-1');
  const device = await created(t, alice, '/api/iotnodes', { name: 'alice meter' });
  await share(t, alice, 'device', device, bob.id, ['read']);
  await share(t, alice, 'credentialsSet', out.setId, bob.id, ['write', 'read']);
  const channel = await created(t, bob, '/api/channels', { name: 'bob export', iotnode: device, mqtt: { type: 'basicCredentialsSet', recipient: out.setId } });
  // Alice's own device and channel to the same consumer: the output follows the log in order, so a change of it arriving later proves hers was handled.
  const sentinel = await created(t, alice, '/api/iotnodes', { name: 'alice sentinel' });
  await created(t, alice, '/api/channels', { iotnode: sentinel, mqtt: { type: 'basicCredentialsSet', recipient: out.setId } });
  try {
    await update(t, alice, device, { note: 'shared' });
    await eventually(async () => notes(out.got, device).includes('shared'), 10_000, 'the change while shared');

    await unshare(t, alice, 'device', device, bob.id);
    await update(t, alice, device, { note: 'private 1' });
    await update(t, alice, device, { note: 'private 2' });
    await update(t, alice, sentinel, { note: 'after' });
    await eventually(async () => notes(out.got, sentinel).includes('after'), 10_000, 'the sentinel change');
    assert.equal(notes(out.got, device), ['shared'], 'nothing published after the revocation');
    const refused = await channelLog(t, channel);
    assert.equal(refused.map((e) => [e.type, e.category, e.message]), [['warning', 'access', `Channel ${channel}: changes of iotnode ${device} are not sent: its creator cannot read iotnode ${device}. They are sent again once that is no longer so.`]], 'one entry for two changes not sent');
    assert.equal(refused[0]!.data, { iotnode: device, delivery: 'refused', reason: `its creator cannot read iotnode ${device}` });
    const shown = await t.call('GET', `/api/logs?resourceId=${channel}`, { token: bob.token });
    assert.is(shown.status, 200, shown.text);
    assert.is(shown.body.logs.length, 1, 'the creator reads it on the channel');

    await share(t, alice, 'device', device, bob.id, ['read']);
    await update(t, alice, device, { note: 'shared again' });
    await eventually(async () => notes(out.got, device).includes('shared again'), 10_000, 'the change once shared again');
    assert.equal(notes(out.got, device), ['shared', 'shared again']);
    const back = await eventually(async () => ((await channelLog(t, channel)).length === 2 ? channelLog(t, channel) : undefined), 5000, 'the entry of the return');
    assert.equal([back[1]!.type, back[1]!.message], ['info', `Channel ${channel}: changes of iotnode ${device} are sent again: its creator may read it.`]);
  } finally {
    await out.client.endAsync();
  }
});

rights('given Erin\'s http channel on a device Alice shared with her, when an admin disables Erin, then nothing is POSTed until she is enabled again, and the channel logs the stop and the return', async ({ t, alice }) => {
  const erin = await tenant(t, 'erin');
  const r = await receiver();
  const device = await created(t, alice, '/api/iotnodes', { name: 'alice boiler' });
  await share(t, alice, 'device', device, erin.id, ['read']);
  const channel = await created(t, erin, '/api/channels', { name: 'erin hook', iotnode: device, http: { url: r.url } });
  const posted = () => r.received.filter((x) => x.body.iotnode?._id === device && x.body.diff?.note !== undefined).map((x) => x.body.diff.note);
  try {
    await update(t, alice, device, { note: 'before' });
    await eventually(async () => posted().includes('before'), 10_000, 'the change before');

    assert.is((await t.call('PATCH', `/api/users/${erin.id}`, { body: { enabled: false } })).status, 200);
    await update(t, alice, device, { note: 'while disabled' });
    await eventually(async () => (await channelLog(t, channel)).length === 1, 10_000, 'the entry of the stop');

    assert.is((await t.call('PATCH', `/api/users/${erin.id}`, { body: { enabled: true } })).status, 200);
    await update(t, alice, device, { note: 'enabled again' });
    // One channel delivers one device's changes in order: the last arriving means the one before was handled.
    await eventually(async () => posted().includes('enabled again'), 10_000, 'the change once enabled');
    assert.equal(posted(), ['before', 'enabled again']);
    const log = await eventually(async () => ((await channelLog(t, channel)).length === 2 ? channelLog(t, channel) : undefined), 5000, 'the entry of the return');
    assert.equal(log.map((e) => [e.type, e.data.delivery, e.data.reason]), [['warning', 'refused', 'its creator no longer exists or is disabled'], ['info', 'sent', undefined]]);
  } finally {
    await r.close();
  }
});

rights('given Frank\'s mqtt channel on a device Alice shared with him, when Frank is deleted, then the channel publishes nothing more and logs why once', async ({ t, alice }) => {
  const frank = await tenant(t, 'frank');
  const out = await consumer(t, alice, 'alice-out-3');
  const device = await created(t, alice, '/api/iotnodes', { name: 'alice pump' });
  await share(t, alice, 'device', device, frank.id, ['read']);
  await share(t, alice, 'credentialsSet', out.setId, frank.id, ['write', 'read']);
  const channel = await created(t, frank, '/api/channels', { iotnode: device, mqtt: { type: 'basicCredentialsSet', recipient: out.setId } });
  const sentinel = await created(t, alice, '/api/iotnodes', { name: 'alice sentinel 3' });
  await created(t, alice, '/api/channels', { iotnode: sentinel, mqtt: { type: 'basicCredentialsSet', recipient: out.setId } });
  try {
    await update(t, alice, device, { note: 'before' });
    await eventually(async () => notes(out.got, device).includes('before'), 10_000, 'the change before');

    assert.is((await t.call('DELETE', `/api/users/${frank.id}`)).status, 204);
    await update(t, alice, device, { note: 'after 1' });
    await update(t, alice, device, { note: 'after 2' });
    await update(t, alice, sentinel, { note: 'sentinel' });
    await eventually(async () => notes(out.got, sentinel).includes('sentinel'), 10_000, 'the sentinel change');
    assert.equal(notes(out.got, device), ['before']);
    const log = await channelLog(t, channel);
    assert.equal(log.map((e) => e.message), [`Channel ${channel}: changes of iotnode ${device} are not sent: its creator no longer exists or is disabled. They are sent again once that is no longer so.`]);
  } finally {
    await out.client.endAsync();
  }
});

rights('given Gus\'s mqtt channel on Alice\'s device group, of whose devices Alice shared only one with him, then only that device\'s changes are published, and the other is logged once as not sent', async ({ t, alice }) => {
  const gus = await tenant(t, 'gus');
  const out = await consumer(t, alice, 'alice-out-4');
  const open = await created(t, alice, '/api/iotnodes', { name: 'alice shared sensor' });
  const closed = await created(t, alice, '/api/iotnodes', { name: 'alice private sensor' });
  const group = await created(t, alice, '/api/devicegroups', { name: 'alice sensors', devices: [open, closed] });
  await share(t, alice, 'deviceGroup', group, gus.id, ['read']);
  await share(t, alice, 'device', open, gus.id, ['read']);
  await share(t, alice, 'credentialsSet', out.setId, gus.id, ['write', 'read']);
  const channel = await created(t, gus, '/api/channels', { deviceGroup: group, mqtt: { type: 'basicCredentialsSet', recipient: out.setId } });
  try {
    await update(t, alice, closed, { note: 'private 1' });
    await update(t, alice, closed, { note: 'private 2' });
    await update(t, alice, open, { note: 'shared' });
    await eventually(async () => notes(out.got, open).includes('shared'), 10_000, 'the shared device\'s change');
    assert.equal(notes(out.got, closed), [], 'nothing of the device Gus may not read');
    const log = await channelLog(t, channel);
    assert.equal(log.map((e) => e.data), [{ iotnode: closed, delivery: 'refused', reason: `its creator cannot read iotnode ${closed}` }]);
  } finally {
    await out.client.endAsync();
  }
});

rights.run();

const restart = suite('channel refusals across a restart');

restart('given a channel whose creator is disabled and whose refusal is logged, when the platform restarts and more changes are refused, then nothing more is logged until the creator is enabled again', async () => {
  const first = await startTestPlatform();
  const databaseUrl = first.platform.deps.config.databaseUrl;
  let second: TestPlatform | null = null;
  const r = await receiver();
  try {
    const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
    assert.is((await first.call('POST', '/api/roles', { body: { name: 'tenant', permissions: { device: all, channel: all, accessRight: all, log: ['GET'] } } })).status, 201);
    const alice = await tenant(first, 'alice');
    const harry = await tenant(first, 'harry');
    const device = await created(first, alice, '/api/iotnodes', { name: 'alice heater' });
    await share(first, alice, 'device', device, harry.id, ['read']);
    const channel = await created(first, harry, '/api/channels', { iotnode: device, http: { url: r.url } });
    assert.is((await first.call('PATCH', `/api/users/${harry.id}`, { body: { enabled: false } })).status, 200);
    await update(first, alice, device, { note: 'before the restart' });
    await eventually(async () => (await channelLog(first, channel)).length === 1, 10_000, 'the entry of the stop');
    await first.stop();

    second = await startTestPlatform({ databaseUrl });
    const again = { ...alice, token: await second.login('alice', alice.password) };
    await update(second, again, device, { note: 'after the restart' });
    // The channel's own checkpoint passes a change only once it was delivered or dropped: then it was refused while Harry was disabled.
    await eventually(async () => {
      const { rows } = await sql<{ passed: boolean }>`SELECT (c.commit_position, c.prepare_position) >= (e.transaction_id::text::numeric, e.global_position) AS passed
        FROM es.checkpoints c, es.events e
        WHERE c.name = ${`channels-http:${channel}`} AND e.stream_id = ${`device-${device}`} AND e.data->'set'->>'note' = 'after the restart'`.execute(second!.platform.deps.db);
      return rows[0]?.passed;
    }, 10_000, 'the channel past the change after the restart');
    assert.is((await second.call('PATCH', `/api/users/${harry.id}`, { body: { enabled: true } })).status, 200);
    await update(second, again, device, { note: 'enabled' });
    await eventually(async () => r.received.some((x) => x.body.diff?.note === 'enabled'), 10_000, 'the change once enabled');
    assert.equal(r.received.map((x) => x.body.diff?.note).filter((n) => n !== undefined), ['enabled'], 'nothing while disabled, before or after the restart');
    const log = await eventually(async () => ((await channelLog(second!, channel)).length >= 2 ? channelLog(second!, channel) : undefined), 5000, 'the entry of the return');
    assert.equal(log.map((e) => e.data.delivery), ['refused', 'sent'], 'the refusal read back after the restart, not logged again');
  } finally {
    await (second ?? first).stop().catch(() => undefined);
    await r.close();
  }
});

restart.run();
