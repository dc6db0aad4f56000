import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import type { PlatformOptions } from '../../api/platform.js';
import { eventually } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';
import { TheThingsStackStandIn, type Downlink } from '../standins/thethingsstack.js';

const APP = 'greenhouse-app';
const WEBHOOK = 'device-platform';
const API_KEY = 'NNSXS.VEEBURF3KR77ZR6EUK2RZOYVZSQQBPZU3U4TWMI.5D7KXYJ2JZAGS3DUSBXVPWBHBLVJFVDFQ2EQ5QF3HMDB4ECMRBOQ';
const EUI = '70b3d57ed0052b11';
const CELLAR_EUI = '70b3d57ed0052b12';
const OTHER_EUI = '70b3d57ed0052b13';
const STRANGER_EUI = '70b3d57ed0052bff';
/** The console's default device id for a DevEUI. */
const DEVICE = `eui-${EUI}`;
const CELLAR = 'cellar-node';
const OTHER = `eui-${OTHER_EUI}`;

interface Ctx {
  t: TestPlatform;
  tts: TheThingsStackStandIn;
  connector: Record<string, any>;
  device: Record<string, any>;
  cellar: Record<string, any>;
}

const it = suite<Ctx>('The Things Stack: uplinks and downlink events through its webhook, commands through its Application Server API');

/**
 * The first retry 1 s after the first attempt, as in production (a test sees the command wait for it and answers
 * before it), the next ones after 0.5 s instead of 5 s and more; a request waits 4 s for its outcome instead of 8 s.
 */
const COMMANDS: PlatformOptions = { commandRetry: { delaysMs: [1_000, 500] }, commandWaitMs: 4_000 };

it.before(async (ctx) => {
  ctx.t = await startTestPlatform({}, COMMANDS);
  ctx.tts = await new TheThingsStackStandIn(
    APP,
    WEBHOOK,
    API_KEY,
    new Map([
      [DEVICE, { devEui: EUI, devAddr: '260B1A2F' }],
      [CELLAR, { devEui: CELLAR_EUI, devAddr: '260B1A30' }],
      [OTHER, { devEui: OTHER_EUI, devAddr: '260B1A31' }],
    ]),
  ).start();
  const res = await ctx.t.call('POST', '/api/connectors', { body: { name: 'greenhouse', integration: 'TheThingsStack', theThingsStack: { url: `${ctx.tts.url}/`, apiKey: API_KEY, applicationId: APP, webhookId: WEBHOOK } } });
  assert.is(res.status, 201, res.text);
  ctx.connector = res.body;
  ctx.tts.webhook = { url: `${ctx.t.baseUrl}/api/integrations/the-things-stack/${res.body._id}`, headers: { Authorization: `Bearer ${res.body.webhookSecret}` } };
  await givenTranslator(ctx.t);
  const translatorPreferences = [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }];
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'greenhouse climate', connector: res.body._id, devEui: EUI.toUpperCase(), translatorPreferences } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body;
  // Named by its The Things Stack device id only, as devices registered without the console's default id are.
  const cellar = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'cellar climate', connector: res.body._id, networkDeviceId: CELLAR, translatorPreferences } });
  assert.is(cellar.status, 201, cellar.text);
  ctx.cellar = cellar.body;
});
it.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.tts.stop();
});

const command = (t: TestPlatform, body: Record<string, unknown>) => t.call('PUT', '/api/iotnodes/command', { body });
const sendDownlink = (t: TestPlatform, iotnodeId: string, payload: Record<string, unknown>) => command(t, { command: 'apiCall', iotnodeId, data: { callName: 'sendDownlink', callData: { payload } } });
const downlinkOf = async (t: TestPlatform, deviceId: string, commandId: string) => ((await t.call('GET', `/api/iotnodes/${deviceId}/downlinks`)).body as Record<string, any>[]).find((d) => d.commandId === commandId);
const statusBecomes = (t: TestPlatform, deviceId: string, commandId: string, status: string) => eventually(async () => (await downlinkOf(t, deviceId, commandId))?.status === status, 10_000, `the downlink ${status}`);
const pushes = (tts: TheThingsStackStandIn) => tts.requests.filter((r) => r.method === 'POST' && r.path.endsWith('/down/push'));
const b64 = (hex: string) => Buffer.from(hex, 'hex').toString('base64');

it('when a connector is created, then its API key is never returned and its webhook secret is returned once', async ({ t, connector }) => {
  assert.type(connector.webhookSecret, 'string');
  assert.is(connector.theThingsStack.apiKey, undefined);
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.is(read.body.status, 'ok');
  assert.not.ok(read.text.includes(API_KEY));
  assert.not.ok(read.text.includes(connector.webhookSecret));
  assert.equal([read.body.theThingsStack.applicationId, read.body.theThingsStack.webhookId], [APP, WEBHOOK]);
  const integrations = (await t.call('GET', '/api/integrations')).body as Record<string, any>[];
  const tts = integrations.find((i) => i.name === 'TheThingsStack')!;
  assert.is(tts.available, true);
  assert.is(tts.webhook, '/api/integrations/the-things-stack/{connectorId}');
  for (const [field, value] of [['applicationId', 'Greenhouse App'], ['webhookId', 'a'], ['apiKey', '']] as const) {
    const bad = await t.call('POST', '/api/connectors', { body: { name: 'bad', integration: 'TheThingsStack', theThingsStack: { url: 'https://eu1.cloud.thethings.network', apiKey: API_KEY, applicationId: APP, webhookId: WEBHOOK, [field]: value } } });
    assert.is(bad.status, 422, `${field}: ${bad.text}`);
    assert.match(bad.text, new RegExp(`^ERR - theThingsStack\\.${field} `));
  }
  const missing = await t.call('POST', '/api/connectors', { body: { name: 'bad', integration: 'TheThingsStack', theThingsStack: { url: 'https://eu1.cloud.thethings.network', apiKey: API_KEY, applicationId: APP } } });
  assert.is(missing.status, 422, missing.text);
});

it("when the webhook posts an uplink_message, then the device's translator decodes it into fields and history, with the radio metadata", async ({ t, tts, device }) => {
  const res = await tts.uplink(DEVICE, 1, Buffer.from(climateHex(22.5, 55, 3105), 'hex'));
  assert.is(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 22.5, 'the decoded temperature');
  assert.is(after.relativeHumidity, 55);
  assert.is(after.batteryVoltage, 3.105);
  assert.equal(after.encodedData, { hexEncoded: climateHex(22.5, 55, 3105), port: 1 });
  assert.equal(after.radio, { fCnt: 1, gateways: 2, rssi: -61, snr: 9.25, gatewayId: 'roof-gateway', frequency: 867100000, spreadingFactor: 9, devAddr: '260b1a2f' });
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), [22.5]);
  assert.ok((await t.call('GET', `/api/iotnodes/${device._id}/stats/fields`)).body.includes('radio.snr'));
});

it('when the webhook posts the same uplink twice (a retry of the webhook), then it is stored once', async ({ t, tts, device }) => {
  const body = {
    end_device_ids: { device_id: DEVICE, application_ids: { application_id: APP }, dev_eui: EUI.toUpperCase(), dev_addr: '260B1A2F' },
    correlation_ids: ['as:up:01JD8Z6W7M3QKQ3Y0V1E2R5T7C', 'gs:uplink:01JD8Z6W6ZB1Q9ZJ6N4V2C8M1X'],
    received_at: new Date().toISOString(),
    uplink_message: { f_port: 1, f_cnt: 42, frm_payload: b64(climateHex(31, 45, 3000)), settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 7 } }, frequency: '868100000' } },
  };
  assert.is((await tts.send('uplink_message', body)).status, 200);
  assert.is((await tts.send('uplink_message', body)).status, 200);
  await deviceWhen(t, device._id, (d) => d.temperature === 31, 'the repeated uplink');
  const stats = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature&start=0`);
  assert.is(stats.body.filter((p: { value: number }) => p.value === 31).length, 1);
});

it('when a device is named by its device id only, then its uplinks find it without a DevEUI and its downlinks go to that id', async ({ t, tts, cellar }) => {
  const res = await tts.send('uplink_message', {
    end_device_ids: { device_id: CELLAR, application_ids: { application_id: APP } },
    correlation_ids: ['as:up:01JD8Z9K2W5Q4B7N0X3C6V8M1Z'],
    uplink_message: { f_port: 1, f_cnt: 7, frm_payload: b64(climateHex(12, 80, 2900)), settings: { data_rate: { lora: { bandwidth: 125000, spreading_factor: 12 } }, frequency: '868500000' } },
  });
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, cellar._id, (d) => d.temperature === 12, 'the cellar uplink');
  assert.equal(after.radio, { fCnt: 7, gateways: 0, frequency: 868500000, spreadingFactor: 12 });
  const queued = await sendDownlink(t, cellar._id, { fPort: 3, payloadHex: '01' });
  assert.is(queued.status, 202, queued.text);
  assert.is(pushes(tts).at(-1)!.path, `/api/v3/as/applications/${APP}/webhooks/${WEBHOOK}/devices/${CELLAR}/down/push`);
  assert.is(tts.queues.get(CELLAR)!.length, 1);
});

it('when a downlink is queued, then The Things Stack gets exactly the documented push, and the item is queued', async ({ t, tts, device }) => {
  tts.requests.length = 0;
  const res = await sendDownlink(t, device._id, { fPort: '10', payloadHex: '0a0b', confirmed: true });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  assert.is(tts.requests.length, 1, 'one request: the push');
  const push = tts.requests[0]!;
  assert.is(push.method, 'POST');
  assert.is(push.path, `/api/v3/as/applications/${APP}/webhooks/${WEBHOOK}/devices/${DEVICE}/down/push`);
  assert.is(push.headers.authorization, `Bearer ${API_KEY}`);
  assert.is(push.headers['content-type'], 'application/json');
  assert.equal(push.body, { downlinks: [{ f_port: 10, frm_payload: b64('0a0b'), confirmed: true, priority: 'NORMAL', correlation_ids: [`platform:command:${res.body.commandId}`] }] });
  const item = await downlinkOf(t, device._id, res.body.commandId);
  assert.equal([item!.status, item!.fPort, item!.data, item!.confirmed], ['queued', 10, '0a0b', true]);
  // The Application Server's downlink_queued is answered and changes nothing.
  await eventually(async () => tts.deliveries.some((d) => d.message === 'downlink_queued' && d.status === 200), 10_000, 'downlink_queued delivered');
  assert.is((await downlinkOf(t, device._id, res.body.commandId))!.status, 'queued');
});

it("when the device's receive window takes the item (downlink_sent), then it leaves the queue as sent; downlink_ack makes it acked", async ({ t, tts, device }) => {
  const queued = ((await t.call('GET', `/api/iotnodes/${device._id}/downlinks?status=queued`)).body as Record<string, any>[])[0]!;
  const item = (await tts.transmit(DEVICE))!;
  assert.ok(item.correlation_ids.includes(`platform:command:${queued.commandId}`));
  assert.is(tts.deliveries.at(-1)!.status, 200);
  await statusBecomes(t, device._id, queued.commandId, 'sent');
  assert.is(tts.queues.get(DEVICE)!.length, 0);
  await tts.ack(DEVICE, item);
  await statusBecomes(t, device._id, queued.commandId, 'acked');
  // A repeated downlink_sent after the acknowledgement changes nothing.
  await tts.post(DEVICE, 'downlink_sent', { ...item });
  assert.is((await downlinkOf(t, device._id, queued.commandId))!.status, 'acked');
});

it('when the device does not acknowledge (downlink_nack) and The Things Stack gives up (downlink_failed), then the item stays sent, then fails with the reason', async ({ t, tts, device }) => {
  const res = await sendDownlink(t, device._id, { fPort: 4, payloadHex: 'beef', confirmed: true });
  assert.is(res.status, 202, res.text);
  const item = (await tts.transmit(DEVICE))!;
  await statusBecomes(t, device._id, res.body.commandId, 'sent');
  assert.is((await tts.nack(DEVICE, item)).status, 200);
  await eventually(async () => (await logsOf(t, device._id)).some((l) => l.message.includes(`did not acknowledge the confirmed downlink of command ${res.body.commandId}`)), 10_000, 'the nack in the device log');
  assert.is((await downlinkOf(t, device._id, res.body.commandId))!.status, 'sent');
  const again = (await tts.transmit(DEVICE))!;
  await tts.fail(DEVICE, again);
  await statusBecomes(t, device._id, res.body.commandId, 'failed');
  const one = await t.call('GET', `/api/commands/${res.body.commandId}`);
  assert.is(one.body.error, 'confirmed downlink reached max retries of 8 (max_retries_reached)');
});

it('when the queue is read and flushed, then the items come back from the queue list, the queue is replaced by none, and the queued items are flushed', async ({ t, tts, device }) => {
  const first = await sendDownlink(t, device._id, { fPort: '2', payloadHex: '01' });
  assert.is(first.status, 202, first.text);
  tts.requests.length = 0;
  const read = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'getDownlinks', callData: { devEui: EUI } } });
  assert.is(read.status, 200, read.text);
  assert.equal(tts.requests.map((r) => [r.method, r.path, r.headers.authorization]), [['GET', `/api/v3/as/applications/${APP}/devices/${DEVICE}/down`, `Bearer ${API_KEY}`]]);
  assert.is(read.body.items.length, 1);
  const [listed] = read.body.items;
  assert.equal([listed.fPort, listed.data, listed.confirmed, listed.priority, listed.commandId], [2, '01', false, 'NORMAL', first.body.commandId]);
  assert.ok(listed.fCntDown > 0);
  const flush = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'clearDownlinks', callData: { devEui: EUI } } });
  assert.is(flush.status, 202, flush.text);
  const replace = tts.requests.find((r) => r.path.endsWith('/down/replace'))!;
  assert.is(replace.path, `/api/v3/as/applications/${APP}/webhooks/${WEBHOOK}/devices/${DEVICE}/down/replace`);
  assert.equal(replace.body, { downlinks: [] });
  assert.is(tts.queues.get(DEVICE)!.length, 0);
  await statusBecomes(t, device._id, first.body.commandId, 'flushed');
});

it('when The Things Stack cannot be reached, then the command answers pending, is retried and logged, queued once, and the connector shows failing, then ok', async ({ t, tts, device, connector }) => {
  tts.mode = 'down';
  const res = await sendDownlink(t, device._id, { fPort: 5, payloadHex: 'ff01' });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'pending');
  const failing = await eventually(async () => {
    const c = await t.call('GET', `/api/connectors/${connector._id}`);
    return c.body.status === 'failing' ? c.body : undefined;
  }, 10_000, 'the connector to show failing');
  assert.match(failing.lastError, /cannot be reached/);
  assert.ok((await logsOf(t, connector._id)).some((l) => l.message.includes(`(${res.body.commandId})`) && /attempt 1 failed/.test(l.message)));
  tts.mode = 'up';
  const queued = await eventually(async () => {
    const d = await downlinkOf(t, device._id, res.body.commandId);
    return d?.status === 'queued' ? d : undefined;
  }, 20_000, 'the retried command');
  assert.ok(queued.attempts >= 1);
  const mine = tts.queues.get(DEVICE)!.filter((i) => i.correlation_ids.includes(`platform:command:${res.body.commandId}`));
  assert.is(mine.length, 1, 'queued once');
  await eventually(async () => (await t.call('GET', `/api/connectors/${connector._id}`)).body.status === 'ok', 10_000, 'ok again');
});

it('when The Things Stack queued a downlink but its answer was lost, then the retry finds it in the queue list by its correlation id and does not push it again', async ({ t, tts, device }) => {
  tts.requests.length = 0;
  tts.mode = 'lost';
  const res = await sendDownlink(t, device._id, { fPort: 6, payloadHex: 'c0ffee' });
  assert.is(res.status, 202, res.text);
  tts.mode = 'up';
  await statusBecomes(t, device._id, res.body.commandId, 'queued');
  assert.ok((await downlinkOf(t, device._id, res.body.commandId))!.attempts >= 1, 'the first attempt lost its answer');
  const correlation = `platform:command:${res.body.commandId}`;
  assert.is(pushes(tts).filter((r) => JSON.stringify(r.body).includes(correlation)).length, 1, 'pushed once');
  assert.ok(tts.requests.some((r) => r.method === 'GET' && r.path.endsWith(`/devices/${DEVICE}/down`)), 'the queue was listed before queueing again');
  assert.is(tts.queues.get(DEVICE)!.filter((i) => i.correlation_ids.includes(correlation)).length, 1, 'queued once');
});

it('when The Things Stack answers 503, then the attempt is recorded with its message and the command is retried until it takes it', async ({ t, tts, device }) => {
  tts.mode = 'failing';
  const answer = sendDownlink(t, device._id, { fPort: 7, payloadHex: '07' });
  const failed = await eventually(async () => {
    const d = ((await t.call('GET', `/api/iotnodes/${device._id}/downlinks?status=pending`)).body as Record<string, any>[])[0];
    return d?.attempts === 1 ? d : undefined;
  }, 10_000, 'the first attempt to fail');
  assert.match(failed.error, /answered 503: error:pkg\/cluster:peer_unavailable \(NETWORK_SERVER cluster peer unavailable\)$/);
  tts.mode = 'up';
  const res = await answer;
  assert.is(res.status, 202, res.text);
  assert.equal(res.body, { commandId: failed.commandId, status: 'queued' });
  const correlation = `platform:command:${failed.commandId}`;
  assert.is(tts.queues.get(DEVICE)!.filter((i) => i.correlation_ids.includes(correlation)).length, 1, 'queued once');
});

it('when The Things Stack refuses (a device it does not know, a paused webhook), then 502 with its message, logged on the connector, and nothing queued', async ({ t, tts, connector }) => {
  const stranger = await t.call('POST', '/api/iotnodes', { body: { name: 'unknown to The Things Stack', connector: connector._id, devEui: STRANGER_EUI } });
  const res = await sendDownlink(t, stranger.body._id, { fPort: 1, payloadHex: '00' });
  assert.is(res.status, 502, res.text);
  assert.match(res.text, new RegExp(`^ERR - TheThingsStack did not take the command: error:pkg/applicationserver:device_not_found \\(device \`${APP}\\.eui-${STRANGER_EUI}\` not found\\) \\(command [0-9a-f]{24}\\)$`));
  assert.is(tts.queues.get(`eui-${STRANGER_EUI}`), undefined);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('refused: error:pkg/applicationserver:device_not_found')), 10_000, 'the refusal in the connector log');
  assert.is(((await t.call('GET', `/api/iotnodes/${stranger.body._id}/downlinks`)).body as Record<string, any>[])[0]!.status, 'refused');

  tts.paused = true;
  const paused = await sendDownlink(t, stranger.body._id, { fPort: 1, payloadHex: '00' });
  tts.paused = false;
  assert.is(paused.status, 502);
  assert.match(paused.text, /^ERR - TheThingsStack did not take the command: the webhook is paused in The Things Stack \(406\)/);
});

it('when the API key is wrong, then 502 with The Things Stack\'s message and the connector shows failing', async ({ t, tts }) => {
  const bad = await t.call('POST', '/api/connectors', { body: { name: 'revoked key', integration: 'TheThingsStack', theThingsStack: { url: tts.url, apiKey: 'NNSXS.REVOKED.KEY', applicationId: APP, webhookId: WEBHOOK } } });
  assert.is(bad.status, 201, bad.text);
  const node = await t.call('POST', '/api/iotnodes', { body: { name: 'behind a revoked key', connector: bad.body._id, devEui: OTHER_EUI } });
  const res = await sendDownlink(t, node.body._id, { fPort: 1, payloadHex: '00' });
  assert.is(res.status, 502, res.text);
  assert.match(res.text, /error:pkg\/identityserver:api_key_not_found \(API key not found\)/);
  const c = await eventually(async () => {
    const read = await t.call('GET', `/api/connectors/${bad.body._id}`);
    return read.body.status === 'failing' ? read.body : undefined;
  }, 10_000, 'failing');
  assert.match(c.lastError, /API key not found/);
  assert.is(tts.queues.get(OTHER), undefined);
});

it("when a downlink event carries another connector's command, then that command is untouched and the call is logged", async ({ t, tts, connector }) => {
  const other = await t.call('POST', '/api/connectors', { body: { name: 'other application', integration: 'TheThingsStack', theThingsStack: { url: `${tts.url}/api/v3`, apiKey: API_KEY, applicationId: APP, webhookId: WEBHOOK } } });
  const node = await t.call('POST', '/api/iotnodes', { body: { name: 'other node', connector: other.body._id, devEui: OTHER_EUI } });
  const res = await sendDownlink(t, node.body._id, { fPort: 9, payloadHex: '09' });
  assert.is(res.status, 202, res.text);
  const item = tts.queues.get(OTHER)!.find((i) => i.correlation_ids.includes(`platform:command:${res.body.commandId}`))!;
  // Posted through the first connector's webhook, about its own device.
  const forged = await tts.post(DEVICE, 'downlink_ack', { ...item });
  assert.is(forged.status, 200);
  assert.equal(JSON.parse(forged.text), { stored: 0 });
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes(`no command of this connector has id ${res.body.commandId}`)), 10_000, 'the log line');
  assert.is((await downlinkOf(t, node.body._id, res.body.commandId))!.status, 'queued');
});

it('when the webhook posts a downlink message for a downlink the platform did not queue, or a message it does not use, then 200 and nothing changes', async ({ t, tts, device }) => {
  const foreign: Downlink = { session_key_id: 'AXBSH1Pk6Z0G166RlH16CQ==', f_port: 15, f_cnt: 3, frm_payload: 'vu8=', priority: 'NORMAL', correlation_ids: ['as:downlink:01E19B99501X84X6CV471TVSZ1', 'custom-id'] };
  const before = (await t.call('GET', `/api/iotnodes/${device._id}/downlinks`)).text;
  for (const [message, content] of [['downlink_sent', foreign], ['downlink_ack', foreign], ['location_solved', { location: { latitude: 52.1, longitude: 4.3, source: 'SOURCE_GPS' } }], ['join_accept', { session_key_id: 'AXBSH1Pk6Z0G166RlH16CQ==', received_at: new Date().toISOString() }]] as const) {
    const res = await tts.post(DEVICE, message, content);
    assert.is(res.status, 200, `${message}: ${res.text}`);
    assert.equal(JSON.parse(res.text), { stored: 0 });
  }
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}/downlinks`)).text, before);
  await eventually(async () => (await logsOf(t, device._id)).some((l) => l.message === 'Joined the network as 260B1A2F'), 10_000, 'the join in the device log');
});

it('when a webhook call has no secret, a wrong one, names an unknown connector or another integration\'s path, then 401, and the refusal is logged on the connector', async ({ t, tts, connector }) => {
  const url = tts.webhook!.url;
  const body = JSON.stringify({ end_device_ids: { device_id: DEVICE, dev_eui: EUI }, uplink_message: { f_port: 1, frm_payload: 'AAAA' } });
  const post = (target: string, headers: Record<string, string>) => fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const before = (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Webhook call refused')).length;
  assert.is((await post(url, {})).status, 401);
  assert.is((await post(url, { authorization: 'Bearer not-the-secret' })).status, 401);
  assert.is((await post(url, { authorization: `Basic ${Buffer.from('user:pass').toString('base64')}` })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/the-things-stack/ffffffffffffffffffffffff`, tts.webhook!.headers)).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/chirpstack/${connector._id}?event=up`, tts.webhook!.headers)).status, 401, "another integration's path");
  await eventually(async () => (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Webhook call refused') && l.category === 'access').length >= before + 3, 10_000, 'the refusals');
});

it('when an uplink names a DevEUI the connector does not know, then nothing is stored and the connector log says so', async ({ t, tts, connector }) => {
  const before = (await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count');
  const res = await tts.send('uplink_message', { end_device_ids: { device_id: 'eui-0000000000000001', application_ids: { application_id: APP }, dev_eui: '0000000000000001' }, correlation_ids: ['as:up:01JD8ZB4E0X9D2Q7T5M3W1R6Y8'], uplink_message: { f_port: 1, frm_payload: 'AA==' } });
  assert.is(res.status, 200);
  assert.equal(JSON.parse(res.text), { stored: 0 });
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('devEui 0000000000000001')), 10_000, 'the connector log');
  assert.is((await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count'), before);
});

it('when a webhook body is malformed, then a 4xx naming the field, a line in the connector log, and nothing is stored', async ({ t, tts, device, connector }) => {
  const ids = { device_id: DEVICE, application_ids: { application_id: APP }, dev_eui: EUI };
  const up = (uplink: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ end_device_ids: ids, correlation_ids: ['as:up:01JD8ZC0000000000000000000'], uplink_message: uplink, ...extra });
  const cases: [unknown, RegExp][] = [
    [up({ f_port: 1, frm_payload: 'not base64!' }), /^ERR - uplink_message\.frm_payload must be base64$/],
    [up({ f_port: 300, frm_payload: 'AA==' }), /^ERR - uplink_message\.f_port /],
    [up({ f_port: 1, frm_payload: Buffer.alloc(300).toString('base64') }), /^ERR - uplink_message\.frm_payload is 300 bytes/],
    [up({ f_port: 1, frm_payload: 'AA==' }, { end_device_ids: { ...ids, dev_eui: 'xyz' } }), /^ERR - end_device_ids\.dev_eui /],
    [up({ f_port: 1, frm_payload: 'AA==' }, { end_device_ids: { dev_eui: EUI } }), /^ERR - end_device_ids\.device_id /],
    [up({ f_port: 1, frm_payload: 'AA==' }, { end_device_ids: undefined }), /^ERR - end_device_ids is required/],
    [up({ f_port: 1, frm_payload: 'AA==' }, { correlation_ids: 'as:up:1' }), /^ERR - correlation_ids must be a list of strings/],
    [{ end_device_ids: ids, uplink_message: 'gkHe' }, /^ERR - uplink_message must be an object/],
    [{ end_device_ids: ids, downlink_failed: { error: { name: 'x' } } }, /^ERR - downlink_failed\.downlink must be an object/],
    [{ end_device_ids: ids, something_else: {} }, /^ERR - body must carry one of uplink_message, join_accept/],
    [[up({ f_port: 1, frm_payload: 'AA==' })], /^ERR - body must be (a JSON )?object/],
  ];
  const before = await t.call('GET', `/api/iotnodes/${device._id}`);
  for (const [body, message] of cases) {
    const res = await tts.send('malformed', body);
    assert.is(res.status, 422, `${JSON.stringify(body).slice(0, 100)}: ${res.text}`);
    assert.match(res.text, message);
  }
  const broken = await tts.send('malformed', null, '{"end_device_ids": {"device_id": "');
  assert.ok(broken.status >= 400 && broken.status < 500, `a body that is not JSON: ${broken.status}`);
  assert.not.ok(tts.deliveries.some((d) => d.status >= 500), 'never a 500');
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.startsWith('Webhook call refused: ERR - uplink_message.frm_payload must be base64')), 10_000, 'the connector log');
  const after = await t.call('GET', `/api/iotnodes/${device._id}`);
  assert.equal(after.body.radio, before.body.radio);
  assert.is(after.body.temperature, before.body.temperature);
});

it.run();
