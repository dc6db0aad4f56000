import { sql } from 'kysely';
import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import mqtt, { type MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { Mosquitto } from '../support/mosquitto.js';
import { MqttProxy } from '../support/mqttProxy.js';
import { eventually, projected } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';

const PLATFORM_LOGIN = { username: 'platform', password: 'platform-secret-1' };
const DEVICE_LOGIN = { username: 'field-gateway', password: 'gateway-secret-1' };

interface Ctx {
  t: TestPlatform;
  broker: Mosquitto;
  gateway: MqttClient;
  connector: Record<string, any>;
}

const ext = suite<Ctx>('Generic connector with an external broker: the platform as a client of a real Mosquitto');

/** A client of the external broker, as a field gateway or a device would be. */
function brokerClient(broker: Mosquitto, login = DEVICE_LOGIN, clientId?: string): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(broker.url, { ...login, protocolVersion: 4, reconnectPeriod: 500, connectTimeout: 5_000, ...(clientId ? { clientId, clean: false } : {}) });
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
}

const connectorBody = (broker: Mosquitto, overrides: Record<string, unknown> = {}) => ({
  name: 'plant floor broker',
  integration: 'Generic',
  mqttServer: { host: broker.host, port: 1883, protocol: 'mqtt', ...PLATFORM_LOGIN },
  uplink: { topic: 'plant/#' },
  downlink: { topic: 'plant/commands' },
  ...overrides,
});

const connectorOf = async (t: TestPlatform, id: string) => (await t.call('GET', `/api/connectors/${id}`)).body as Record<string, any>;

/** The device whose secret is `topic`, once it exists. */
const deviceOfTopic = (t: TestPlatform, topic: string) =>
  eventually(async () => {
    const row = await t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', topic).executeTakeFirst();
    return row ? ((await t.call('GET', `/api/iotnodes/${row.id}`)).body as Record<string, any>) : undefined;
  }, 10_000, `the device of ${topic}`);

const connectedLine = (t: TestPlatform, id: string, count = 1) =>
  eventually(async () => (await logsOf(t, id)).filter((l) => l.message.startsWith('Connected')).length >= count, 15_000, 'the connection to the external broker');

ext.before(async (ctx) => {
  ctx.broker = await new Mosquitto({ [PLATFORM_LOGIN.username]: PLATFORM_LOGIN.password, [DEVICE_LOGIN.username]: DEVICE_LOGIN.password }).start();
  ctx.t = await startTestPlatform();
  await givenTranslator(ctx.t);
  const res = await ctx.t.call('POST', '/api/connectors', { body: connectorBody(ctx.broker) });
  assert.is(res.status, 201, res.text);
  ctx.connector = res.body;
  await connectedLine(ctx.t, res.body._id);
  ctx.gateway = await brokerClient(ctx.broker);
});

ext.after(async (ctx) => {
  await ctx.gateway?.endAsync(true);
  await ctx.t?.stop();
  await ctx.broker?.dispose();
});

ext('when the connector is created, then its password is never returned and it shows ok once connected and subscribed', async ({ t, connector }) => {
  assert.is(connector.mqttServer.password, undefined);
  assert.is(connector.webhookSecret, undefined);
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.is(read.body.status, 'ok');
  assert.not.ok(read.text.includes(PLATFORM_LOGIN.password));
  const [line] = (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Connected'));
  assert.match(line!.message, /subscribed to plant\/#/);
});

ext('when an external connector\'s topics are not valid MQTT topics, then 422 naming the field, and nothing is created', async ({ t, broker }) => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ uplink: { topic: 'plant/#/more' } }, /^ERR - uplink\.topic must be an MQTT topic filter/],
    [{ uplink: { topic: 'plant/a+' } }, /^ERR - uplink\.topic must be an MQTT topic filter/],
    [{ downlink: { topic: 'plant/+/cmd' } }, /^ERR - downlink\.topic must be a topic without \+, #/],
    [{ downlink: { topic: '$SYS/x' } }, /^ERR - downlink\.topic must be a topic without/],
  ];
  const before = (await t.call('GET', '/api/connectors')).body.length;
  for (const [overrides, message] of cases) {
    const res = await t.call('POST', '/api/connectors', { body: connectorBody(broker, overrides) });
    assert.is(res.status, 422, `${JSON.stringify(overrides)}: ${res.text}`);
    assert.match(res.text, message);
  }
  assert.is((await t.call('GET', '/api/connectors')).body.length, before);
});

ext('when a device publishes on a new topic, then its device is created, bound to the connector, with the connector\'s creator and the rights shared on the connector', async ({ t, gateway, connector }) => {
  const viewer = await t.call('POST', '/api/users', { body: { username: 'ext-viewer', attributes: { roles: ['viewerBasic'] } } });
  assert.is(viewer.status, 201, viewer.text);
  const shared = await t.call('POST', '/api/access-rights', { body: { resourceType: 'connector', resourceId: connector._id, subjectType: 'user', subjectId: viewer.body.id, scope: ['read'] } });
  assert.is(shared.status, 201, shared.text);
  await gateway.publishAsync('plant/line-1/th', JSON.stringify({ temperature: 20.5, door: 'closed' }), { qos: 1 });
  const device = await deviceOfTopic(t, 'plant/line-1/th');
  assert.is(device.name, 'MQTT - plant/line-1/th');
  assert.is(device.connector, connector._id);
  assert.is(device.temperature, 20.5);
  assert.is(device.door, 'closed');
  const token = await t.login('ext-viewer', viewer.body.temporaryPassword);
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token })).status, 200, 'the right on the connector passed to its new device');
  const row = await t.platform.deps.db.selectFrom('devices').select('created_by').where('id', '=', device._id).executeTakeFirstOrThrow();
  const creator = await t.platform.deps.db.selectFrom('connectors').select('created_by').where('id', '=', connector._id).executeTakeFirstOrThrow();
  assert.is(row.created_by, creator.created_by);
});

ext('when the device has a translator, then its raw uplinks are decoded into fields and history', async ({ t, gateway }) => {
  const device = await deviceOfTopic(t, 'plant/line-1/th');
  const set = await t.call('PUT', `/api/iotnodes/${device._id}`, { body: { translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(set.status, 200, set.text);
  await gateway.publishAsync('plant/line-1/th', JSON.stringify({ encodedData: { hexEncoded: climateHex(22.25, 41, 3010), port: 1 } }), { qos: 1 });
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 22.25, 'the decoded temperature');
  assert.is(after.relativeHumidity, 41);
  assert.is(after.batteryVoltage, 3.01);
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), [20.5, 22.25]);
});

ext('when a device is registered with the topic as its secret and this connector, then its first message is decoded into it', async ({ t, gateway, connector }) => {
  const made = await t.call('POST', '/api/iotnodes', { body: { name: 'Cold room', secret: 'plant/cold-room', connector: connector._id, translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(made.status, 201, made.text);
  await gateway.publishAsync('plant/cold-room', JSON.stringify({ encodedData: { hexEncoded: climateHex(-18, 80, 2990), port: 1 } }), { qos: 1 });
  const after = await deviceWhen(t, made.body._id, (d) => d.temperature === -18, 'the decoded report');
  assert.is(after.name, 'Cold room');
});

ext('when a downlink is sent, then a subscriber of the broker gets it on <downlink.topic>/<mqttTopic>, and the platform does not take it as a report', async ({ t, broker, connector }) => {
  const subscriber = await brokerClient(broker);
  try {
    const received = new Promise<{ topic: string; message: string; qos: number }>((resolve) => subscriber.on('message', (topic, message, packet) => resolve({ topic, message: message.toString(), qos: packet.qos })));
    await subscriber.subscribeAsync('plant/commands/#', { qos: 1 });
    const res = await t.call('PUT', '/api/connectors/command', { body: { command: 'sendDownlink', integrationName: 'Generic', connectorId: connector._id, data: { mqttTopic: 'line-1/config', message: '{"interval":60}' } } });
    assert.is(res.status, 202, res.text);
    assert.equal([res.body.status, res.body.topic], ['queued', 'plant/commands/line-1/config']);
    assert.equal(await received, { topic: 'plant/commands/line-1/config', message: '{"interval":60}', qos: 1 });
    const command = await t.call('GET', `/api/commands/${res.body.commandId}`);
    assert.is(command.body.status, 'published');
    await projected(t);
    const echoed = await t.platform.deps.db.selectFrom('devices').select('id').where('secret', 'like', 'plant/commands%').execute();
    assert.equal(echoed, []);
  } finally {
    await subscriber.endAsync(true);
  }
});

ext('when the broker delivers a flood of QoS 0 messages, more than the platform takes at once from one connection, then it pauses reading (logged on the connector), and every one is stored, in order', async ({ t, gateway, connector }) => {
  const N = 6000;
  // Each publish waits for the one before it to be written: MQTT.js may reorder QoS 0 publishes queued while its socket is full.
  for (let i = 0; i < N; i++) await gateway.publishAsync('plant/flood', JSON.stringify({ n: i }), { qos: 0 });
  const device = await deviceOfTopic(t, 'plant/flood');
  await eventually(async () => {
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeviceReported' AND stream_id = ${`device-${device._id}`}`.execute(t.platform.deps.db);
    return rows[0]!.n === N;
  }, 60_000, `all ${N} messages stored`);
  const { rows } = await sql<{ n: number }>`SELECT (data->'payload'->>'n')::int AS n FROM es.events WHERE type = 'DeviceReported' AND stream_id = ${`device-${device._id}`} ORDER BY revision`.execute(t.platform.deps.db);
  assert.ok((await logsOf(t, connector._id)).some((l) => /^Reading from mqtt:\/\/\S+ paused: 2000 messages wait to be stored/.test(l.message)), 'reading paused once 2,000 waited');
  const bad = rows.findIndex((r, i) => r.n !== i);
  assert.is(bad, -1, `first out of order at ${bad}: ${JSON.stringify(rows.slice(Math.max(0, bad - 3), bad + 5).map((r) => r.n))}`);
});

ext('when messages are not JSON objects, are on the platform\'s own topics, or name another connector\'s device, then nothing is stored and the connector log says why', async ({ t, gateway, connector }) => {
  const other = await t.call('POST', '/api/iotnodes', { body: { name: 'someone else\'s', secret: 'plant/foreign' } });
  assert.is(other.status, 201, other.text);
  await gateway.publishAsync('plant/bad-json', 'not json', { qos: 1 });
  await gateway.publishAsync('plant/array', '[1,2]', { qos: 1 });
  await gateway.publishAsync('plant/nul', JSON.stringify({ text: 'a\u0000b' }), { qos: 1 });
  await gateway.publishAsync('plant/foreign', JSON.stringify({ temperature: 99 }), { qos: 1 });
  const long = `plant/${randomBytes(1500).toString('hex')}`;
  await gateway.publishAsync(long, JSON.stringify({ temperature: 1 }), { qos: 1 });
  await eventually(async () => {
    const messages = (await logsOf(t, connector._id)).map((l) => l.message);
    return (
      messages.includes(`MQTT message on ${long.slice(0, 200)}… not stored: the topic is longer than 1024 bytes, the most a device's secret (its topic) may be`) &&
      messages.includes('MQTT message on plant/bad-json not stored: the payload is not JSON') &&
      messages.includes('MQTT message on plant/array not stored: the payload is not a JSON object') &&
      messages.some((m) => m.startsWith('MQTT message on plant/nul not stored: the field text must not contain NUL')) &&
      messages.includes('MQTT message on plant/foreign not stored: the topic is the secret of an iotnode that is not of this connector')
    );
  }, 10_000, 'the refusals in the connector log');
  await projected(t);
  const stored = await t.platform.deps.db.selectFrom('devices').select('secret').where('secret', 'in', ['plant/bad-json', 'plant/array', 'plant/nul']).execute();
  assert.equal(stored, []);
  assert.is((await t.call('GET', `/api/iotnodes/${other.body._id}`)).body.temperature, undefined);
});

ext('when a connector subscribes to the platform\'s own roots, then those messages are refused: their secrets name devices of the platform\'s broker', async ({ t, broker, gateway }) => {
  const wide = await t.call('POST', '/api/connectors', { body: connectorBody(broker, { name: 'everything', uplink: { topic: 'svc/#' }, downlink: { topic: 'down' } }) });
  assert.is(wide.status, 201, wide.text);
  await connectedLine(t, wide.body._id);
  await gateway.publishAsync('svc/generic/v2/acme/meter-1', JSON.stringify({ energy: 1 }), { qos: 1 });
  await eventually(async () => (await logsOf(t, wide.body._id)).some((l) => l.message.startsWith('MQTT message on svc/generic/v2/acme/meter-1 not stored: the topic is below svc/generic/v2')), 10_000, 'the refusal');
  assert.is((await t.call('DELETE', `/api/connectors/${wide.body._id}`)).status, 204);
});

ext('when the broker stops, then the connector shows failing with the reason; when it is back, then ok again and messages flow', async ({ t, broker, gateway, connector }) => {
  await broker.stop();
  const failing = await eventually(async () => {
    const c = await connectorOf(t, connector._id);
    return c.status === 'failing' ? c : undefined;
  }, 15_000, 'the connector to show failing');
  assert.ok(failing.lastError.startsWith(`mqtt://${broker.host}:1883: `), failing.lastError);
  assert.type(failing.lastErrorAt, 'string');
  assert.ok((await logsOf(t, connector._id)).some((l) => l.type === 'error' && l.message.startsWith('Connection to the external broker failing')));
  await broker.restart();
  await eventually(async () => (await connectorOf(t, connector._id)).status === 'ok', 20_000, 'the connector to be ok again');
  await eventually(async () => gateway.connected, 10_000, 'the gateway to reconnect');
  // The restarted broker forgot the session: the platform subscribed again.
  await gateway.publishAsync('plant/line-2/th', JSON.stringify({ temperature: 18 }), { qos: 1 });
  const device = await deviceOfTopic(t, 'plant/line-2/th');
  assert.is(device.temperature, 18);
  assert.ok((await logsOf(t, connector._id)).some((l) => l.message.startsWith('Connected again')));
});

ext('when a downlink is sent while the broker is down, then it is retried and published once the broker is back, once', async ({ t, broker, connector }) => {
  await broker.stop();
  await eventually(async () => (await connectorOf(t, connector._id)).status === 'failing', 15_000, 'failing');
  const sending = t.call('PUT', '/api/connectors/command', { body: { command: 'sendDownlink', integrationName: 'Generic', connectorId: connector._id, data: { mqttTopic: 'line-2/config', message: '{"interval":30}' } } });
  await eventually(async () => (await t.platform.deps.db.selectFrom('commands').select('attempts').where('connector_id', '=', connector._id).where('status', '=', 'pending').executeTakeFirst())?.attempts, 10_000, 'a failed attempt');
  await broker.restart();
  const subscriber = await brokerClient(broker);
  try {
    const received: string[] = [];
    subscriber.on('message', (topic, message) => received.push(`${topic} ${message}`));
    await subscriber.subscribeAsync('plant/commands/#', { qos: 1 });
    const res = await sending;
    assert.is(res.status, 202, res.text);
    assert.ok(['queued', 'pending'].includes(res.body.status), res.text);
    await eventually(async () => received.length > 0, 20_000, 'the downlink at the subscriber');
    await eventually(async () => (await t.call('GET', `/api/commands/${res.body.commandId}`)).body.status === 'published', 10_000, 'published');
    assert.ok((await logsOf(t, connector._id)).some((l) => /attempt 1 failed: publishing on plant\/commands\/line-2\/config failed: not connected/.test(l.message)));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(received, ['plant/commands/line-2/config {"interval":30}']);
  } finally {
    await subscriber.endAsync(true);
  }
});

ext('when the password is wrong, then the connector shows failing with the broker\'s reason, and stores nothing', async ({ t, broker }) => {
  const res = await t.call('POST', '/api/connectors', { body: connectorBody(broker, { name: 'wrong password', mqttServer: { host: broker.host, port: 1883, protocol: 'mqtt', username: PLATFORM_LOGIN.username, password: 'not-the-password' } }) });
  assert.is(res.status, 201, res.text);
  const failing = await eventually(async () => {
    const c = await connectorOf(t, res.body._id);
    return c.status === 'failing' ? c : undefined;
  }, 15_000, 'failing');
  assert.match(failing.lastError, /Connection refused: (Not authorized|Bad username or password)/);
  assert.not.ok(JSON.stringify(failing).includes('not-the-password'));
  assert.is((await t.call('DELETE', `/api/connectors/${res.body._id}`)).status, 204);
});

ext('when a connector is deleted, then the platform leaves its broker: later messages store nothing', async ({ t, broker, gateway }) => {
  const res = await t.call('POST', '/api/connectors', { body: connectorBody(broker, { name: 'short-lived', uplink: { topic: 'annex/#' }, downlink: { topic: 'annex-down' } }) });
  assert.is(res.status, 201, res.text);
  await connectedLine(t, res.body._id);
  await gateway.publishAsync('annex/probe', JSON.stringify({ n: 1 }), { qos: 1 });
  await deviceOfTopic(t, 'annex/probe');
  assert.is((await t.call('DELETE', `/api/connectors/${res.body._id}`)).status, 204);
  // The DELETE answered once the connection's end had begun; the unsubscribe and DISCONNECT take a moment on the wire.
  await new Promise((r) => setTimeout(r, 1_500));
  await gateway.publishAsync('annex/probe', JSON.stringify({ n: 2 }), { qos: 1 });
  await new Promise((r) => setTimeout(r, 500));
  await projected(t);
  assert.is((await deviceOfTopic(t, 'annex/probe')).n, 1);
});

ext('when the connection is lost after a message was stored but before its PUBACK reached the broker, then the broker sends it again with DUP and it is stored once', async ({ t, broker, gateway }) => {
  const proxy = await new MqttProxy({ host: broker.host, port: broker.port }).start();
  try {
    const res = await t.call('POST', '/api/connectors', { body: connectorBody(broker, { name: 'flaky link', mqttServer: { host: proxy.host, port: 1883, protocol: 'mqtt', ...PLATFORM_LOGIN }, uplink: { topic: 'flaky/#' }, downlink: { topic: 'flaky-down' } }) });
    assert.is(res.status, 201, res.text);
    await connectedLine(t, res.body._id);
    proxy.loseNextPubAck = true;
    await gateway.publishAsync('flaky/meter', JSON.stringify({ reading: 1 }), { qos: 1 });
    const device = await deviceOfTopic(t, 'flaky/meter');
    await eventually(async () => proxy.published.some((p) => p.dup), 15_000, 'the broker to send the unacknowledged message again, with DUP');
    const first = proxy.published[0]!;
    assert.ok(proxy.published.some((p) => p.dup && p.packetId === first.packetId), 'the same packet id');
    await gateway.publishAsync('flaky/meter', JSON.stringify({ reading: 2 }), { qos: 1 });
    await deviceWhen(t, device._id, (d) => d.reading === 2, 'the next message');
    const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=reading&start=0`);
    assert.equal(stats.body.map((p: { value: number }) => p.value), [1, 2], 'the re-sent message stored once');
    // A burst: taken as fast as the broker sends them, acknowledged in the order they came.
    await eventually(async () => proxy.acked.length === proxy.published.filter((p) => !p.dup).length, 10_000, 'every message so far acknowledged');
    const seen = proxy.published.length;
    const acked = proxy.acked.length;
    await Promise.all(Array.from({ length: 60 }, (_, i) => gateway.publishAsync(`flaky/meter-${i % 6}`, JSON.stringify({ reading: i }), { qos: 1 })));
    await eventually(async () => proxy.acked.length >= acked + 60, 15_000, 'the burst acknowledged');
    assert.equal(proxy.acked.slice(acked), proxy.published.slice(seen).map((p) => p.packetId), 'PUBACKs in the order of the PUBLISHes');
    assert.is((await t.call('DELETE', `/api/connectors/${res.body._id}`)).status, 204);
  } finally {
    await proxy.stop();
  }
});

ext('when the platform is stopped, then what devices publish meanwhile is kept by the broker and stored once after the restart', async (ctx) => {
  const { broker, gateway, connector } = ctx;
  const databaseUrl = ctx.t.platform.deps.config.databaseUrl!;
  await ctx.t.stop();
  for (let i = 1; i <= 20; i++) await gateway.publishAsync('plant/counter', JSON.stringify({ count: i }), { qos: 1 });
  ctx.t = await startTestPlatform({ databaseUrl });
  const t = ctx.t;
  const device = await eventually(async () => {
    const row = await t.platform.deps.db.selectFrom('devices').select(['id']).where('secret', '=', 'plant/counter').executeTakeFirst();
    if (!row) return undefined;
    const d = (await t.call('GET', `/api/iotnodes/${row.id}`)).body as Record<string, any>;
    return d.count === 20 ? d : undefined;
  }, 20_000, 'the messages published while the platform was down');
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=count&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), Array.from({ length: 20 }, (_, i) => i + 1), 'each message stored once, in order');
  assert.is((await connectorOf(t, connector._id)).status, 'ok');
});

ext.run();
