import { randomBytes } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually, projected } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { refusing } from '../support/refusing.js';
import { loadCheckpoint } from '../../domain/eventstore/subscriber.js';
import { comparePositions } from '../../domain/shared/events.js';

const EUI = '70b3d57ed0052a11';
const STRANGER_EUI = '70b3d57ed0052aff';
const TOKEN = 'chirpstack-api-token';

interface Ctx {
  t: TestPlatform;
  ns: ChirpStackStandIn;
  connector: Record<string, any>;
  device: Record<string, any>;
}

const cs = suite<Ctx>('ChirpStack: uplinks through its HTTP integration, downlinks through its queue API');

cs.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  const res = await ctx.t.call('POST', '/api/connectors', { body: { name: 'plant network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: TOKEN } } });
  assert.is(res.status, 201, res.text);
  ctx.connector = res.body;
  ctx.ns.integration = { url: `${ctx.t.baseUrl}/api/integrations/chirpstack/${res.body._id}`, headers: { Authorization: `Bearer ${res.body.webhookSecret}` } };
  await givenTranslator(ctx.t);
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'climate node', connector: res.body._id, devEui: EUI.toUpperCase(), translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body;
});
cs.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.ns.stop();
});

const command = (t: TestPlatform, body: Record<string, unknown>, token?: string) => t.call('PUT', '/api/iotnodes/command', { body, ...(token ? { token } : {}) });
const downlinks = async (t: TestPlatform, deviceId: string) => (await t.call('GET', `/api/iotnodes/${deviceId}/downlinks`)).body as Record<string, any>[];

cs('when a connector is created, then its API token is never returned and its webhook secret is returned once', async ({ t, connector }) => {
  assert.type(connector.webhookSecret, 'string');
  assert.is(connector.chirpstack.apiToken, undefined);
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.is(read.body.status, 'ok');
  assert.not.ok(read.text.includes(TOKEN));
  assert.not.ok(read.text.includes(connector.webhookSecret));
  assert.is(read.body.chirpstack.url, connector.chirpstack.url);
});

cs('when ChirpStack posts an uplink, then the device\'s translator decodes it into fields and history, with the radio metadata', async ({ t, ns, device }) => {
  const res = await ns.uplink(EUI, 1, Buffer.from(climateHex(21.5, 40, 3012), 'hex'));
  assert.is(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 21.5, 'the decoded temperature');
  assert.is(after.relativeHumidity, 40);
  assert.is(after.batteryVoltage, 3.012);
  assert.equal(after.encodedData, { hexEncoded: climateHex(21.5, 40, 3012), port: 1 });
  assert.equal(after.radio, { fCnt: 1, gateways: 2, rssi: -57, snr: 9.5, gatewayId: '0016c001ff10a235', frequency: 868300000, spreadingFactor: 7, dataRate: 5, devAddr: '01e6e3f2' });
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), [21.5]);
  assert.ok((await t.call('GET', `/api/iotnodes/${device._id}/stats/fields`)).body.includes('radio.rssi'));
});

cs('when ChirpStack posts an uplink with a time outside the years 0001 to 9999, then it is stored at the time it arrived and the read models keep up', async ({ t, ns, device }) => {
  const before = Date.now();
  const res = await ns.uplink(EUI, 1, Buffer.from(climateHex(19.25, 41, 3000), 'hex'), { time: '0000-01-01T00:00:00Z' });
  assert.is(res.status, 200, res.text);
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 19.25, 'the uplink with a year-0 time');
  assert.ok(Date.parse(after.reportedAt) >= before - 1000, after.reportedAt);
  const parked = await t.platform.deps.db.selectFrom('es.parked_events' as any).select('event_id').execute();
  assert.equal(parked, []);
});

cs('when ChirpStack posts an uplink whose deduplicationId is 3,000 random characters, twice (its retry), then it is stored, once', async ({ t, ns, device }) => {
  const frame = Buffer.from(climateHex(17.75, 42, 3000), 'hex');
  const body = { deduplicationId: randomBytes(2250).toString('base64'), time: new Date().toISOString(), deviceInfo: { devEui: EUI }, fCnt: 98, fPort: 1, data: frame.toString('base64') };
  const first = await ns.post('up', body);
  assert.is(first.status, 200, first.text);
  assert.equal(JSON.parse(first.text), { stored: 1 });
  assert.is((await ns.post('up', body)).status, 200);
  await deviceWhen(t, device._id, (d) => d.temperature === 17.75, 'the uplink with a long deduplication id');
  await projected(t);
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.is(stats.body.filter((p: { value: number }) => p.value === 17.75).length, 1);
});

cs('when ChirpStack posts the same uplink twice (its retry), then it is stored once', async ({ t, ns, device }) => {
  const body = { deduplicationId: '0b8a8a4e-8a36-4f5b-8c3e-3b6f2f4c0e01', time: new Date().toISOString(), deviceInfo: { devEui: EUI }, fCnt: 99, fPort: 1, data: Buffer.from(climateHex(30, 50, 3000), 'hex').toString('base64') };
  assert.is((await ns.post('up', body)).status, 200);
  assert.is((await ns.post('up', body)).status, 200);
  await deviceWhen(t, device._id, (d) => d.temperature === 30, 'the repeated uplink');
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.is(stats.body.filter((p: { value: number }) => p.value === 30).length, 1);
});

cs('when a downlink is queued, then ChirpStack gets exactly the documented request, and the item is queued with its id', async ({ t, ns, device }) => {
  ns.requests.length = 0;
  const res = await command(t, { command: 'loraAppServerQueueDownlink', iotnodeId: device._id, integrationName: 'ChirpStack', data: { confirmed: true, reference: 'valve open', fPort: '10', data: '0a0b' } });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  const post = ns.requests.find((r) => r.method === 'POST')!;
  assert.is(post.path, `/api/devices/${EUI}/queue`);
  assert.is(post.headers['grpc-metadata-authorization'], `Bearer ${TOKEN}`);
  assert.equal(post.body, { queueItem: { devEui: EUI, confirmed: true, fPort: 10, data: Buffer.from('0a0b', 'hex').toString('base64') } });
  const [item] = await downlinks(t, device._id);
  assert.is(item!.commandId, res.body.commandId);
  assert.is(item!.status, 'queued');
  assert.is(item!.networkItemId, ns.queues.get(EUI)![0]!.id);
  assert.equal([item!.fPort, item!.data, item!.confirmed, item!.reference], [10, '0a0b', true, 'valve open']);
});

cs('when the device\'s receive window takes the item (txack), then it leaves the queue as sent; its acknowledgement makes it acked', async ({ t, ns, device }) => {
  const queued = (await downlinks(t, device._id)).find((d) => d.status === 'queued')!;
  const item = await ns.transmit(EUI);
  assert.is(item!.id, queued.networkItemId);
  await eventually(async () => (await downlinks(t, device._id)).find((d) => d.commandId === queued.commandId)?.status === 'sent', 10_000, 'sent');
  await ns.ack(EUI, item!, true);
  await eventually(async () => (await downlinks(t, device._id)).find((d) => d.commandId === queued.commandId)?.status === 'acked', 10_000, 'acked');
});

cs('when the queue is read and flushed with the generic apiCall form, then the items come back and the queued ones are flushed', async ({ t, ns, device }) => {
  const first = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'sendDownlink', callData: { devEui: EUI, payload: { fPort: '2', payloadHex: '01' } } } });
  assert.is(first.status, 202, first.text);
  const read = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'getDownlinks', callData: { devEui: EUI } } });
  assert.is(read.status, 200, read.text);
  assert.equal(read.body.items.map((i: Record<string, unknown>) => [i.fPort, i.data]), [[2, '01']]);
  const legacyRead = await command(t, { command: 'loraAppServerGetDeviceQueue', iotnodeId: device._id });
  assert.is(legacyRead.status, 200, legacyRead.text);
  assert.is(legacyRead.body.items.length, 1);
  const flush = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'clearDownlinks', callData: { devEui: EUI } } });
  assert.is(flush.status, 202, flush.text);
  assert.is(ns.queues.get(EUI)!.length, 0);
  await eventually(async () => (await downlinks(t, device._id)).find((d) => d.commandId === first.body.commandId)?.status === 'flushed', 10_000, 'flushed');
});

cs('when ChirpStack is down, then the command answers pending, is retried, queued once, and the connector shows failing, then ok', async ({ t, ns, device, connector }) => {
  ns.mode = 'down';
  const res = await command(t, { command: 'loraAppServerQueueDownlink', iotnodeId: device._id, data: { fPort: 3, data: 'ff' } });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'pending');
  const failing = await eventually(async () => {
    const c = await t.call('GET', `/api/connectors/${connector._id}`);
    return c.body.status === 'failing' ? c.body : undefined;
  }, 10_000, 'the connector to show failing');
  assert.match(failing.lastError, /cannot be reached/);
  assert.ok((await logsOf(t, connector._id)).some((l) => /attempt 1 failed/.test(l.message)));
  ns.mode = 'up';
  const queued = await eventually(async () => (await downlinks(t, device._id)).find((d) => d.commandId === res.body.commandId && d.status === 'queued'), 20_000, 'the retried command');
  assert.ok(queued.attempts >= 1);
  assert.is(ns.queues.get(EUI)!.filter((i) => i.data === Buffer.from('ff', 'hex').toString('base64')).length, 1, 'queued once');
  await eventually(async () => (await t.call('GET', `/api/connectors/${connector._id}`)).body.status === 'ok', 10_000, 'ok again');
});

cs('when the database fails once as the command delivery saves its place, after the downlink went out, then the batch handled again does not queue it twice', async ({ t, ns, device }) => {
  // Given the next write of the delivery's checkpoint refused, once,
  const saved = await loadCheckpoint(t.platform.deps.db, 'commands');
  await refusing(t.platform.deps.db, 'es.checkpoints', `NEW.name = 'commands'`, async () => {
    // when a downlink is queued,
    const res = await command(t, { command: 'loraAppServerQueueDownlink', iotnodeId: device._id, data: { fPort: 9, data: 'c0ffee' } });
    assert.ok([200, 202].includes(res.status), res.text);
    await eventually(async () => {
      const now = await loadCheckpoint(t.platform.deps.db, 'commands');
      return now !== null && (saved === null || comparePositions(now, saved) > 0);
    }, 15_000, 'the checkpoint saved after the failure');
  });
  // then ChirpStack holds it once, and the command is queued.
  const mine = ns.queues.get(EUI)!.filter((i) => i.fPort === 9 && i.data === Buffer.from('c0ffee', 'hex').toString('base64'));
  assert.is(mine.length, 1, 'queued once');
  const queued = (await downlinks(t, device._id)).filter((d) => d.data === 'c0ffee');
  assert.equal(queued.map((d) => d.status), ['queued']);
});

cs('when ChirpStack refuses, then 502 with its message, logged on the connector, and nothing queued', async ({ t, ns, connector }) => {
  const other = await t.call('POST', '/api/iotnodes', { body: { name: 'unknown to ChirpStack', connector: connector._id, devEui: STRANGER_EUI } });
  const res = await command(t, { command: 'loraAppServerQueueDownlink', iotnodeId: other.body._id, data: { fPort: 1, data: '00' } });
  assert.is(res.status, 502, res.text);
  assert.match(res.text, /^ERR - ChirpStack did not take the command: Object does not exist/);
  assert.is(ns.queues.get(STRANGER_EUI), undefined);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('refused: Object does not exist')), 10_000, 'the refusal in the connector log');
  const [item] = await downlinks(t, other.body._id);
  assert.is(item!.status, 'refused');
});

cs('when a command is unknown, its data is wrong, or neither integration nor connector is known, then 422 naming the problem', async ({ t, device }) => {
  const unknown = await command(t, { command: 'reboot', iotnodeId: device._id });
  assert.is(unknown.status, 422);
  assert.match(unknown.text, /^ERR - command is not a command of the ChirpStack integration; it takes loraAppServerQueueDownlink, loraAppServerGetDeviceQueue, loraAppServerFlushQueue, apiCall/);
  for (const data of [{ fPort: '0', data: '00' }, { fPort: 1, data: 'abc' }, { fPort: 1, data: '00', extra: 1 }, { data: '00' }]) {
    const res = await command(t, { command: 'loraAppServerQueueDownlink', iotnodeId: device._id, data });
    assert.is(res.status, 422, JSON.stringify(data));
    assert.match(res.text, /^ERR - data\./);
  }
  const otherEui = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'sendDownlink', callData: { devEui: STRANGER_EUI, payload: { fPort: 1, payloadHex: '00' } } } });
  assert.is(otherEui.status, 422);
  assert.match(otherEui.text, /devEui must be the iotnode's own devEui/);
  const bare = await t.call('POST', '/api/iotnodes', { body: { name: 'no connector' } });
  const none = await command(t, { command: 'apiCall', iotnodeId: bare.body._id, data: { callName: 'getDownlinks', callData: {} } });
  assert.is(none.status, 422);
  assert.match(none.text, /^ERR - integrationName is required when the iotnode has no connector/);
  const wrong = await command(t, { command: 'apiCall', iotnodeId: device._id, integrationName: 'TheThingsStack', data: { callName: 'getDownlinks', callData: {} } });
  assert.is(wrong.status, 422);
});

cs('when a webhook call has no secret, a wrong one, or names an unknown connector, then 401, and the refusal is logged on the connector', async ({ t, ns, connector }) => {
  const url = `${t.baseUrl}/api/integrations/chirpstack/${connector._id}?event=up`;
  const body = JSON.stringify({ deviceInfo: { devEui: EUI }, fPort: 1, data: 'AAAA' });
  const post = (target: string, headers: Record<string, string>) => fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  assert.is((await post(url, {})).status, 401);
  assert.is((await post(url, { authorization: 'Bearer not-the-secret' })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/chirpstack/ffffffffffffffffffffffff?event=up`, ns.integration!.headers)).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/the-things-stack/${connector._id}`, ns.integration!.headers)).status, 401, 'another integration\'s path');
  await eventually(async () => (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Webhook call refused')).length >= 2, 10_000, 'the refusals');
});

cs('when an uplink names a device the connector does not know, then nothing is stored and the connector log says so', async ({ t, ns, connector }) => {
  const before = (await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count');
  const res = await ns.uplink('0000000000000001', 1, Buffer.from('00', 'hex'));
  assert.is(res.status, 200);
  assert.equal(JSON.parse(res.text), { stored: 0 });
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('devEui 0000000000000001')), 10_000, 'the connector log');
  assert.is((await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count'), before);
});

cs('when a webhook body is malformed, then 422 naming the field, and nothing is stored', async ({ t, ns, device }) => {
  const cases: [string, unknown, RegExp][] = [
    ['up', { deviceInfo: { devEui: EUI }, fPort: 1, data: 'not base64!' }, /^ERR - data must be base64$/],
    ['up', { deviceInfo: { devEui: 'xyz' }, fPort: 1, data: 'AA==' }, /^ERR - deviceInfo\.devEui /],
    ['up', { deviceInfo: { devEui: EUI }, fPort: 300, data: 'AA==' }, /^ERR - fPort /],
    ['up', { deviceInfo: { devEui: EUI }, fPort: 1, data: Buffer.alloc(300).toString('base64') }, /^ERR - data is 300 bytes/],
    ['nonsense', { deviceInfo: { devEui: EUI } }, /^ERR - event must be one of/],
    ['up', [], /^ERR - body must be (a JSON )?object/],
  ];
  for (const [event, body, message] of cases) {
    const res = await ns.post(event, body);
    assert.is(res.status, 422, `${event} ${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    assert.match(res.text, message);
  }
  const missing = await fetch(ns.integration!.url, { method: 'POST', headers: { 'content-type': 'application/json', ...ns.integration!.headers }, body: '{}' });
  assert.is(missing.status, 422);
  const d = await t.call('GET', `/api/iotnodes/${device._id}`);
  assert.is(d.body.radio.fCnt <= 99, true);
});

cs('when a user without write access sends a command, then 404 or 403; a role without PUT on devices gets Forbidden', async ({ t, device }) => {
  const viewer = await t.call('POST', '/api/users', { body: { username: 'cmd-viewer', attributes: { roles: ['viewerBasic'] } } });
  const viewerToken = await t.login('cmd-viewer', viewer.body.temporaryPassword);
  const body = { command: 'loraAppServerGetDeviceQueue', iotnodeId: device._id };
  const forbidden = await command(t, body, viewerToken);
  assert.is(forbidden.status, 403);
  assert.is(forbidden.text, 'Forbidden');
  const installer = await t.call('POST', '/api/users', { body: { username: 'cmd-installer', attributes: { roles: ['installer'] } } });
  const installerToken = await t.login('cmd-installer', installer.body.temporaryPassword);
  assert.is((await command(t, body, installerToken)).status, 404, 'cannot read the device');
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device._id, subjectType: 'user', subjectId: installer.body.id, scope: ['read'] } });
  assert.is((await command(t, body, installerToken)).status, 403, 'can read, not write');
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device._id, subjectType: 'user', subjectId: installer.body.id, scope: ['write'] } });
  assert.is((await command(t, body, installerToken)).status, 200, 'can write');
});

cs.run();
