import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, execFile } from 'node:child_process';
import mqtt from 'mqtt';
import { sql, type Kysely, type Transaction } from 'kysely';
import { channelsProjection } from '../../projections/channels.js';
import type { Database } from '../../projections/database.js';
import { receiver } from '../support/receiver.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from './support.js';

const ROOT = 'svc/generic/v2/channels';

const channels = suite<{ t: TestPlatform; p: Provider; user: GivenUser; a: string; b: string }>('Output topics, channels and device groups');

channels.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'chan', [`${ROOT}/a`, `${ROOT}/b`, `${ROOT}/c`]);
  ctx.user = await givenUser(ctx.t, 'watcher');
  const c = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  await publish(c, `${ROOT}/a`, { n: 0 });
  await publish(c, `${ROOT}/b`, { n: 0 });
  await c.endAsync();
  ctx.a = (await deviceOf(ctx.t, `${ROOT}/a`))._id;
  ctx.b = (await deviceOf(ctx.t, `${ROOT}/b`))._id;
});
channels.after(async (ctx) => {
  await ctx.t.stop();
});

channels('when a channel has no target, both targets, no protocol or two protocols, then 422 names what was found', async ({ t, a }) => {
  const http = { url: 'http://127.0.0.1:1/x' };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ http }, /found none/],
    [{ iotnode: a, deviceGroup: 'dddddddddddddddddddddddd', http }, /found iotnode, deviceGroup/],
    [{ iotnode: a }, /found none/],
    [{ iotnode: a, http, mqtt: { type: 'keycloakUser', recipient: 'x' } }, /found http, mqtt/],
  ];
  for (const [body, message] of cases) {
    const res = await t.call('POST', '/api/channels', { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.match(res.text, message);
  }
});

channels('end to end with mosquitto: a provider publishes with mosquitto_pub, a consumer with a user token gets {iotnode, diff, event} with mosquitto_sub', async ({ t, p, user, a }) => {
  const channel = await t.call('POST', '/api/channels', { body: { name: 'to watcher', iotnode: a, mqtt: { type: 'keycloakUser', recipient: user.id } } });
  assert.is(channel.status, 201, channel.text);
  const port = String(t.mqttPort);
  // -d prints the protocol exchange (lines starting "Client " or "Subscribed"), line-buffered by stdbuf, so the test sees the SUBACK.
  const sub = spawn('stdbuf', ['-oL', 'mosquitto_sub', '-h', '127.0.0.1', '-p', port, '-u', user.id, '-P', user.token, '-t', `svc/output/v2/${user.id}/#`, '-C', '1', '-v', '-q', '1', '-W', '30', '-d']);
  let out = '';
  sub.stdout.on('data', (d) => (out += d));
  // 'close' (not 'exit'): stdout is read to its end.
  const exited = new Promise<number>((r) => sub.on('close', (code) => r(code ?? -1)));
  // Publish only once the broker has granted the subscription: a message before it would never reach the consumer.
  await eventually(async () => out.includes('received SUBACK'), 15_000, 'mosquitto_sub to be subscribed');
  await new Promise<void>((resolve, reject) =>
    execFile('mosquitto_pub', ['-h', '127.0.0.1', '-p', port, '-u', p.username, '-P', p.password, '-t', `${ROOT}/a`, '-m', '{"temperature":19.5}', '-q', '1'], (err) => (err ? reject(err) : resolve())),
  );
  assert.is(await exited, 0, `mosquitto_sub: ${out}`);
  const line = out.split('\n').find((l) => l.startsWith('svc/output/v2/')) ?? '';
  const space = line.indexOf(' ');
  assert.is(line.slice(0, space), `svc/output/v2/${user.id}/iotnode/${a}`, out);
  const message = JSON.parse(line.slice(space + 1));
  assert.is(message.iotnode._id, a);
  assert.is(message.iotnode.temperature, 19.5);
  assert.is(message.iotnode.n, 0);
  assert.is(message.diff.temperature, 19.5);
  assert.is(message.diff.n, undefined, 'only changed attributes');
  assert.is(message.event.type, 'DeviceReported');
  assert.is(message.event.actor, `credentials:${p.setId}`);
  await t.call('DELETE', `/api/channels/${channel.body._id}`);
});

channels('when an mqtt channel targets a credentials set, then MQTT.js logged in with that set receives REST updates too', async ({ t, p, a }) => {
  const channel = await t.call('POST', '/api/channels', { body: { iotnode: a, mqtt: { type: 'basicCredentialsSet', recipient: p.setId } } });
  assert.is(channel.status, 201, channel.text);
  const c = await connectMqtt(t, p.username, p.password);
  const messages: { topic: string; body: any }[] = [];
  c.on('message', (topic, payload) => messages.push({ topic, body: JSON.parse(payload.toString()) }));
  await c.subscribeAsync(`svc/output/v2/${p.setId}/#`, { qos: 1 });
  await t.call('PUT', `/api/iotnodes/${a}`, { body: { description: 'lobby' } });
  const got = await eventually(async () => messages.find((m) => m.body.diff.description === 'lobby'));
  assert.is(got.topic, `svc/output/v2/${p.setId}/iotnode/${a}`);
  assert.is(got.body.event.type, 'DeviceUpdated');
  assert.ok(got.body.diff.updatedAt);
  await c.endAsync();
  await t.call('DELETE', `/api/channels/${channel.body._id}`);
});

channels('when an http channel exists, then changes are POSTed in order with the headers, and Authorization is never returned', async ({ t, p, a }) => {
  const r = await receiver();
  const channel = await t.call('POST', '/api/channels', { body: { iotnode: a, http: { url: r.url, headers: { Authorization: 'Bearer s3cret', 'X-Tenant': 'blue' } } } });
  assert.is(channel.status, 201, channel.text);
  assert.equal(channel.body.http.headers, { 'X-Tenant': 'blue' });
  assert.not.ok((await t.call('GET', `/api/channels/${channel.body._id}`)).text.includes('s3cret'));
  assert.not.ok((await t.call('GET', '/api/channels')).text.includes('s3cret'));
  const c = await connectMqtt(t, p.username, p.password);
  for (let i = 1; i <= 20; i++) await publish(c, `${ROOT}/a`, { seq: i });
  await eventually(async () => r.received.filter((x) => x.body.diff.seq).length >= 20);
  const seqs = r.received.filter((x) => x.body.diff.seq).map((x) => x.body.diff.seq);
  assert.equal(seqs, Array.from({ length: 20 }, (_, i) => i + 1));
  assert.is(r.received[0]!.headers.authorization, 'Bearer s3cret');
  assert.is(r.received[0]!.headers['x-tenant'], 'blue');
  assert.is(r.received[0]!.body.iotnode._id, a);
  // Each message carries its change's event id as its idempotency key, for a receiver to drop a repeat.
  const keys = r.received.filter((x) => x.body.diff.seq).map((x) => x.headers['idempotency-key']);
  assert.equal(keys, r.received.filter((x) => x.body.diff.seq).map((x) => x.body.event.id));
  assert.is(new Set(keys).size, 20);
  await c.endAsync();
  await t.call('DELETE', `/api/channels/${channel.body._id}`);
  await r.close();
});

channels('when an http receiver keeps failing, then delivery is retried with backoff and the final failure is logged on the device', async ({ t, p, b }) => {
  let calls = 0;
  const r = await receiver(() => (calls++, 503));
  const channel = await t.call('POST', '/api/channels', { body: { iotnode: b, http: { url: r.url } } });
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/b`, { fail: 1 });
  const entry = await eventually(async () => {
    const logs = (await t.call('GET', `/api/logs?resourceId=${b}&type=error`)).body.logs as { message: string; category: string; resourceType: string }[];
    return logs.find((l) => l.message.includes(channel.body._id));
  }, 15000, 'the failure log entry');
  assert.is(entry.resourceType, 'device');
  assert.is(calls, 5);
  await c.endAsync();
  await t.call('DELETE', `/api/channels/${channel.body._id}`);
  await r.close();
});

channels('when a channel is on a device group, then devices added to the group later are covered', async ({ t, p, a, b }) => {
  const group = await t.call('POST', '/api/devicegroups', { body: { name: 'floor 1', devices: [a] } });
  assert.is(group.status, 201, group.text);
  assert.equal(group.body.devices, [a]);
  const r = await receiver();
  const channel = await t.call('POST', '/api/channels', { body: { deviceGroup: group.body._id, http: { url: r.url } } });
  assert.is(channel.status, 201, channel.text);
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/b`, { before: 1 });
  await publish(c, `${ROOT}/a`, { member: 1 });
  await eventually(async () => r.received.some((x) => x.body.diff.member === 1));
  assert.not.ok(r.received.some((x) => x.body.iotnode._id === b));
  const patched = await t.call('PATCH', `/api/devicegroups/${group.body._id}`, { body: { devices: [a, b] } });
  assert.equal(patched.body.devices, [a, b]);
  await publish(c, `${ROOT}/b`, { after: 1 });
  await eventually(async () => r.received.some((x) => x.body.iotnode._id === b && x.body.diff.after === 1));
  assert.is((await t.call('GET', `/api/devicegroups/${group.body._id}`)).body.name, 'floor 1');
  await c.endAsync();
  await t.call('DELETE', `/api/channels/${channel.body._id}`);
  assert.is((await t.call('DELETE', `/api/devicegroups/${group.body._id}`)).status, 204);
  await r.close();
});

channels('given devices a caller cannot read, when a group lists one among 10,000 entries, then 422 names its place, at once; 10,000 copies of a readable device are checked in one go', async ({ t, a }) => {
  const hidden = [...Array.from({ length: 9_999 }, () => a)];
  hidden.splice(4_321, 0, 'ffffffffffffffffffffffff');
  const started = Date.now();
  const refused = await t.call('POST', '/api/devicegroups', { body: { name: 'big', devices: hidden } });
  assert.is(refused.status, 422, refused.text);
  assert.is(refused.text, 'ERR - devices.4321 is not an iotnode you can read');
  const copies = await t.call('POST', '/api/devicegroups', { body: { name: 'copies', devices: Array.from({ length: 10_000 }, () => a) } });
  assert.is(copies.status, 201, copies.text);
  assert.ok(Date.now() - started < 5_000, `${Date.now() - started} ms`);
  await t.call('DELETE', `/api/devicegroups/${copies.body._id}`);
});

channels('given an http channel with an Authorization header, when it is replaced, then the next message goes to the new URL with the header kept; a new header replaces it; target and protocol stay; the read model takes the replacement once', async ({ t, p, a, b, user }) => {
  const first = await receiver();
  const second = await receiver();
  const created = await t.call('POST', '/api/channels', { body: { name: 'hook', iotnode: a, http: { url: first.url, headers: { Authorization: 'Bearer one', 'x-site': 'north' } } } });
  assert.is(created.status, 201, created.text);
  const id = created.body._id as string;
  const c = await connectMqtt(t, p.username, p.password);

  const moved = await t.call('PUT', `/api/channels/${id}`, { body: { name: 'moved', iotnode: a, http: { url: second.url, headers: { 'x-site': 'south' } } } });
  assert.is(moved.status, 200, moved.text);
  assert.equal(moved.body, { _id: id, name: 'moved', iotnode: a, http: { url: second.url, headers: { 'x-site': 'south' } } });
  await publish(c, `${ROOT}/a`, { replaced: 1 });
  await eventually(async () => second.received.some((x) => x.body.diff.replaced === 1), 10_000, 'the new URL to get the change');
  const got = second.received.find((x) => x.body.diff.replaced === 1)!;
  assert.is(got.headers.authorization, 'Bearer one', 'a left-out Authorization is kept');
  assert.is(got.headers['x-site'], 'south');
  assert.not.ok(first.received.some((x) => x.body.diff?.replaced === 1));

  assert.is((await t.call('PUT', `/api/channels/${id}`, { body: { iotnode: a, http: { url: second.url, headers: { authorization: 'Bearer two' } } } })).status, 200);
  await publish(c, `${ROOT}/a`, { replaced: 2 });
  await eventually(async () => second.received.some((x) => x.body.diff.replaced === 2), 10_000, 'the second change');
  assert.is(second.received.find((x) => x.body.diff.replaced === 2)!.headers.authorization, 'Bearer two');
  assert.not.match(JSON.stringify((await t.call('GET', `/api/channels/${id}`)).body), /Bearer/);

  const retarget = await t.call('PUT', `/api/channels/${id}`, { body: { iotnode: b, http: { url: second.url } } });
  assert.is(retarget.status, 422);
  assert.match(retarget.text, /^ERR - iotnode cannot change/);
  const reprotocol = await t.call('PUT', `/api/channels/${id}`, { body: { iotnode: a, mqtt: { type: 'keycloakUser', recipient: user.id } } });
  assert.is(reprotocol.status, 422);
  assert.match(reprotocol.text, /^ERR - mqtt cannot replace http/);
  assert.is((await t.call('PUT', `/api/channels/${id}`, { token: user.token, body: { iotnode: a, http: { url: second.url } } })).status, 403);
  assert.is((await t.call('PUT', '/api/channels/ffffffffffffffffffffffff', { body: { iotnode: a, http: { url: second.url } } })).status, 404);

  // The read model: a replacement applied again changes nothing.
  const events = await t.platform.deps.store.readStream(`channel-${id}`);
  const last = events.filter((e) => e.type === 'ChannelReplaced').at(-1)!;
  const row = async (db: Kysely<Database> | Transaction<Database>) => (await sql<{ row: unknown }>`SELECT to_jsonb(c) AS row FROM channels c WHERE id = ${id}`.execute(db)).rows[0]!.row;
  const once = await row(t.platform.deps.db);
  await t.platform.deps.db.transaction().execute(async (tx) => {
    await channelsProjection.apply(tx, [last]);
    assert.equal(await row(tx), once);
  });

  await c.endAsync();
  await t.call('DELETE', `/api/channels/${id}`);
  await Promise.all([first.close(), second.close()]);
});

channels('when device groups are listed, then each caller sees the groups it may read, ordered by name, with their devices', async ({ t, user, a, b }) => {
  const zeta = await t.call('POST', '/api/devicegroups', { body: { name: 'zeta wing', devices: [b] } });
  const alpha = await t.call('POST', '/api/devicegroups', { body: { name: 'alpha wing', devices: [a, b] } });
  assert.is(zeta.status, 201, zeta.text);
  assert.is(alpha.status, 201, alpha.text);
  const mine = [alpha.body._id, zeta.body._id];
  const all = await t.call('GET', '/api/devicegroups');
  assert.is(all.status, 200, all.text);
  const listed = (all.body as { _id: string; name: string; devices: string[] }[]).filter((g) => mine.includes(g._id));
  assert.equal(listed.map((g) => [g.name, g.devices]), [['alpha wing', [a, b]], ['zeta wing', [b]]]);

  const before = await t.call('GET', '/api/devicegroups', { token: user.token });
  assert.is(before.status, 200, before.text);
  assert.equal(before.body, [], 'a user without rights sees no group');
  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'deviceGroup', resourceId: alpha.body._id, subjectType: 'singleton', subjectId: user.id, scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  const after = await t.call('GET', '/api/devicegroups', { token: user.token });
  assert.equal(after.body.map((g: { _id: string }) => g._id), [alpha.body._id], 'only the group granted');
  for (const id of mine) assert.is((await t.call('DELETE', `/api/devicegroups/${id}`)).status, 204);
  assert.equal((await t.call('GET', '/api/devicegroups', { token: user.token })).body, []);
});

channels('when a channel uses a protocol this build does not deliver, then it is stored and each skipped delivery is logged on the channel', async ({ t, p, a }) => {
  for (const body of [{ bacnet: { host: '10.0.0.5', deviceInstance: 12 } }, { knx: { host: 'knx.local', groupAddress: '1/2/3' } }, { modbus: { host: 'plc', unitId: 1, register: 40001 } }, { cloudIotHub: { connectionString: 'HostName=x' } }]) {
    const res = await t.call('POST', '/api/channels', { body: { iotnode: a, ...body } });
    assert.is(res.status, 201, res.text);
  }
  const bad = await t.call('POST', '/api/channels', { body: { iotnode: a, knx: { host: 'knx', groupAddress: 'nope' } } });
  assert.is(bad.status, 422);
  const bacnet = (await t.call('GET', `/api/channels?iotnode=${a}`)).body.find((ch: Record<string, unknown>) => ch.bacnet);
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/a`, { skipped: 1 });
  await eventually(async () => {
    const logs = (await t.call('GET', `/api/logs?resourceId=${bacnet._id}&resourceType=channel`)).body.logs as { message: string }[];
    return logs.some((l) => l.message.includes('bacnet is not supported'));
  });
  await c.endAsync();
});

channels('when a generic connector sends a downlink, then the credentials set receives it on its push topic', async ({ t, p }) => {
  const connector = await t.call('POST', '/api/connectors', { body: { name: 'generic', basicCredentialsSetId: p.setId, integration: 'Generic' } });
  const c = await connectMqtt(t, p.username, p.password);
  const got = new Promise<{ topic: string; text: string }>((resolve) => c.once('message', (topic, payload) => resolve({ topic, text: payload.toString() })));
  await c.subscribeAsync(`svc/push/v1/${p.setId}/#`, { qos: 1 });
  const res = await t.call('PUT', '/api/connectors/command', { body: { command: 'sendDownlink', integrationName: 'Generic', connectorId: connector.body._id, data: { mqttTopic: 'node-7/config', message: '{"interval":60}' } } });
  assert.is(res.status, 202, res.text);
  assert.equal(await got, { topic: `svc/push/v1/${p.setId}/node-7/config`, text: '{"interval":60}' });
  const bad = await t.call('PUT', '/api/connectors/command', { body: { command: 'sendDownlink', integrationName: 'Generic', connectorId: connector.body._id, data: { mqttTopic: 'a/#', message: 'x' } } });
  assert.is(bad.status, 422);
  await c.endAsync();
});

channels('given a spy whose persistent session asks for its own and the watcher\'s output topics in one SUBSCRIBE, when it comes back, then it gets only its own; a packet of 4,000 topics costs no stall', async ({ t, p, user, a }) => {
  const spy = await givenUser(t, 'spy');
  const watcher = await t.call('POST', '/api/channels', { body: { iotnode: a, mqtt: { type: 'keycloakUser', recipient: user.id } } });
  assert.is(watcher.status, 201, watcher.text);
  const login = { username: spy.id, password: spy.token, clientId: 'spy', clean: false, reconnectPeriod: 0, protocolVersion: 4 as const };
  const first = await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, login);
  // MQTT.js fails a SUBACK with a refusal in it; the SUBACK itself says what was granted.
  const subscribe = (topics: string[]) =>
    new Promise<number[]>((r) => first.subscribe(topics, { qos: 1 }, (_err, _subs, suback) => r(((suback as { granted?: number[] } | undefined)?.granted ?? []) as number[])));
  assert.equal(await subscribe([`svc/output/v2/${spy.id}/#`, `svc/output/v2/${user.id}/#`, '#']), [1, 128, 128]);
  const started = Date.now();
  const many = [`svc/output/v2/${spy.id}/more`, ...Array.from({ length: 4000 }, (_, i) => `svc/output/v2/${user.id}/x${i}`)];
  assert.is((await subscribe(many)).length, 4001);
  assert.ok(Date.now() - started < 5_000, `4,000 refused topics took ${Date.now() - started} ms`);
  await first.endAsync();

  // While the spy is away, the watcher's change is queued for the sessions that hold a matching subscription.
  const watching = await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { username: user.id, password: user.token, reconnectPeriod: 0 });
  const delivered: string[] = [];
  watching.on('message', (topic) => delivered.push(topic));
  await watching.subscribeAsync(`svc/output/v2/${user.id}/#`, { qos: 1 });
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/a`, { temperature: 31 });
  await eventually(async () => delivered.length > 0, 10_000, 'the watcher to get the change');
  const seen: string[] = [];
  const again = await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { ...login, manualConnect: false });
  again.on('message', (topic) => seen.push(topic));
  await publish(c, `${ROOT}/a`, { temperature: 32 });
  await eventually(async () => delivered.length > 1, 10_000, 'the watcher to get the second change');
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(seen, [], 'the spy got none of the watcher\'s messages');
  await Promise.all([again.endAsync(), watching.endAsync(), c.endAsync()]);
  await t.call('DELETE', `/api/channels/${watcher.body._id}`);
});

channels.run();
