import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';
import { ThingParkStandIn } from '../standins/thingpark.js';

const EUI = '0018b20000000b20';
const STRANGER_EUI = '0018b20000000bff';
const CLIENT_ID = 'dev1-api/ops@example.com';
const CLIENT_SECRET = 'thingpark-client-secret';

interface Ctx {
  t: TestPlatform;
  tp: ThingParkStandIn;
  connector: Record<string, any>;
  device: Record<string, any>;
}

const tp = suite<Ctx>('ThingPark: uplinks through its HTTP application server route, downlinks through its DX API');

tp.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.tp = await new ThingParkStandIn(CLIENT_ID, CLIENT_SECRET, [EUI]).start();
  const res = await ctx.t.call('POST', '/api/connectors', { body: { name: 'operator network', integration: 'ThingPark', thingPark: { url: `${ctx.tp.url}/`, clientId: CLIENT_ID, clientSecret: CLIENT_SECRET } } });
  assert.is(res.status, 201, res.text);
  ctx.connector = res.body;
  ctx.tp.route = { url: `${ctx.t.baseUrl}/api/integrations/thingpark/${res.body._id}`, authorization: `Bearer ${res.body.webhookSecret}` };
  await givenTranslator(ctx.t);
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'cold room', connector: res.body._id, devEui: EUI.toUpperCase(), translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body;
});
tp.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.tp.stop();
});

const command = (t: TestPlatform, body: Record<string, unknown>) => t.call('PUT', '/api/iotnodes/command', { body });
const send = (t: TestPlatform, iotnodeId: string, fPort: number | string, payloadHex: string, confirmed?: boolean) =>
  command(t, { command: 'apiCall', iotnodeId, data: { callName: 'sendDownlink', callData: { devEui: EUI, payload: { fPort, payloadHex, ...(confirmed !== undefined ? { confirmed } : {}) } } } });
const downlinks = async (t: TestPlatform, deviceId: string) => (await t.call('GET', `/api/iotnodes/${deviceId}/downlinks`)).body as Record<string, any>[];
const downlinkOf = async (t: TestPlatform, deviceId: string, commandId: string) => (await downlinks(t, deviceId)).find((d) => d.commandId === commandId);
/** What the network server reported of a command, from its stream. */
const outcomesOf = async (t: TestPlatform, commandId: string) =>
  (await t.platform.deps.store.readStream(`command-${commandId}`)).map((e) => e.type).filter((type) => type.startsWith('Downlink'));
const temperatures = async (t: TestPlatform, deviceId: string) => (await t.call('GET', `/api/iotnodes/${deviceId}/stats?measurement=temperature&start=0`)).body.map((p: { value: number }) => p.value) as number[];
const tokenCalls = (s: ThingParkStandIn) => s.requests.filter((r) => r.path === '/admin/latest/api/oauth/token');
const downlinkCalls = (s: ThingParkStandIn) => s.requests.filter((r) => r.path.endsWith('/downlinkMessages'));

tp('when a connector is created, then its client secret is never returned, its webhook secret is returned once, and its settings are checked', async ({ t, connector }) => {
  assert.type(connector.webhookSecret, 'string');
  assert.is(connector.thingPark.clientSecret, undefined);
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.is(read.body.status, 'ok');
  assert.is(read.body.thingPark.clientId, CLIENT_ID);
  assert.not.ok(read.text.includes(CLIENT_SECRET));
  assert.not.ok(read.text.includes(connector.webhookSecret));
  const listed = (await t.call('GET', '/api/integrations')).body.find((i: { name: string }) => i.name === 'ThingPark');
  assert.equal([listed.available, listed.webhook, listed.writeOnlySettings], [true, '/api/integrations/thingpark/{connectorId}', ['thingPark.clientSecret']]);
  for (const thingPark of [{ url: 'https://dx-api.thingpark.com', clientSecret: 'x' }, { url: 'ftp://dx-api.thingpark.com', clientId: 'a', clientSecret: 'x' }, { url: 'https://dx-api.thingpark.com', clientId: 'a', clientSecret: 'x', asKey: 'y' }]) {
    const bad = await t.call('POST', '/api/connectors', { body: { name: 'incomplete', integration: 'ThingPark', thingPark } });
    assert.is(bad.status, 422, JSON.stringify(thingPark));
    assert.match(bad.text, /^ERR - thingPark/);
  }
});

tp('when ThingPark posts a DevEUI_uplink, then the device\'s translator decodes it into fields and history, with the radio metadata', async ({ t, tp, device }) => {
  const res = await tp.uplink(EUI, 1, Buffer.from(climateHex(4.5, 80, 3300), 'hex'));
  assert.is(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 4.5, 'the decoded temperature');
  assert.is(after.relativeHumidity, 80);
  assert.equal(after.encodedData, { hexEncoded: climateHex(4.5, 80, 3300), port: 1 });
  assert.equal(after.radio, { fCnt: 1, rssi: -80, snr: 7, spreadingFactor: 7, frequency: 868100000, gateways: 2, gatewayId: '004a18e3', devAddr: '04d2848e' });
  assert.equal(await temperatures(t, device._id), [4.5]);
});

tp('when an earlier LRC version writes its numbers as strings, then they are read all the same', async ({ t, tp, device }) => {
  const res = await tp.uplink(EUI, 1, Buffer.from(climateHex(5.25, 70, 3200), 'hex'), {}, true);
  assert.is(res.status, 200, res.text);
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 5.25, 'the frame with string numbers');
  assert.equal([after.radio.fCnt, after.radio.rssi, after.radio.snr, after.radio.spreadingFactor, after.radio.gateways], [2, -80, 7, 7, 2]);
});

tp('when ThingPark posts the same report twice (its route retries), then it is stored once', async ({ t, tp, device }) => {
  const report = { DevEUI_uplink: { Time: '2026-03-01T10:00:00.000+01:00', DevEUI: EUI.toUpperCase(), FPort: 1, FCntUp: 500, payload_hex: climateHex(-2, 60, 3000), LrrRSSI: -90, LrrSNR: 2 } };
  assert.is((await tp.post(report, EUI, '1')).status, 200);
  assert.is((await tp.post(report, EUI, '1')).status, 200);
  await deviceWhen(t, device._id, (d) => d.temperature === -2, 'the report');
  assert.equal((await temperatures(t, device._id)).filter((v) => v === -2), [-2]);
});

tp('when a downlink is queued, then the platform gets a token by the client credentials flow and ThingPark gets exactly the documented request', async ({ t, tp, device }) => {
  tp.requests.length = 0;
  const res = await send(t, device._id, '10', '0A0B', true);
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  const [token] = tokenCalls(tp);
  assert.is(token!.method, 'POST');
  assert.match(String(token!.headers['content-type']), /^application\/x-www-form-urlencoded/);
  assert.equal(Object.fromEntries(new URLSearchParams(token!.raw)), { grant_type: 'client_credentials', client_id: CLIENT_ID, client_secret: CLIENT_SECRET });
  const [post] = downlinkCalls(tp);
  assert.is(post!.method, 'POST');
  assert.is(post!.path, `/core/latest/api/devices/${EUI.toUpperCase()}/downlinkMessages`);
  assert.is(post!.query.get('confirmDownlink'), 'true');
  assert.is(post!.query.get('flushDownlinkQueue'), null, 'the queue is left as it is');
  assert.match(String(post!.headers.authorization), /^Bearer \S+$/);
  assert.equal(post!.body, { payloadHex: '0a0b', targetPorts: '10' });
  assert.equal(tp.queueOf(EUI), [{ payloadHex: '0a0b', fPort: 10, confirmed: true }]);
  const [item] = await downlinks(t, device._id);
  assert.equal([item!.commandId, item!.status, item!.fPort, item!.data, item!.confirmed], [res.body.commandId, 'queued', 10, '0a0b', true]);
});

tp('when more downlinks are queued, then the token is used again until ThingPark stops taking it; then a new one is asked for, and the downlink queued once', async ({ t, tp, device }) => {
  tp.requests.length = 0;
  assert.is((await send(t, device._id, 11, '11')).status, 202);
  assert.is(tokenCalls(tp).length, 0, 'the token of the first downlink');
  tp.revokeTokens();
  const res = await send(t, device._id, 12, '12');
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  assert.is(tokenCalls(tp).length, 1);
  assert.equal(downlinkCalls(tp).map((r) => r.body), [{ payloadHex: '11', targetPorts: '11' }, { payloadHex: '12', targetPorts: '12' }, { payloadHex: '12', targetPorts: '12' }]);
  assert.is(tp.queueOf(EUI).filter((i) => i.payloadHex === '12').length, 1, 'queued once');
});

tp('when the LRC reports a downlink sent, not sent, or rejected, then the queued item it means becomes sent or failed, in queue order', async ({ t, tp, device }) => {
  const ids = (await downlinks(t, device._id)).filter((d) => d.status === 'queued').sort((a, b) => a.requestedAt.localeCompare(b.requestedAt)).map((d) => d.commandId as string);
  assert.is(ids.length, 3);
  await tp.transmit(EUI, 1);
  await eventually(async () => (await downlinkOf(t, device._id, ids[0]!))?.status === 'sent', 10_000, 'sent');
  assert.is((await downlinkOf(t, device._id, ids[1]!))!.status, 'queued');
  await tp.transmit(EUI, 0, 'B0', 'A3');
  const failed = await eventually(async () => {
    const d = await downlinkOf(t, device._id, ids[1]!);
    return d?.status === 'failed' ? d : undefined;
  }, 10_000, 'failed');
  assert.is(failed.error, 'not sent over the air: RX1 B0 (received too late for the slot), RX2 A3 (radio busy)');
  await tp.reject(EUI, 'Downlink counter value already used. Expected=1238');
  const rejected = await eventually(async () => {
    const d = await downlinkOf(t, device._id, ids[2]!);
    return d?.status === 'failed' ? d : undefined;
  }, 10_000, 'rejected');
  assert.is(rejected.error, 'rejected by ThingPark: Downlink counter value already used. Expected=1238');
});

tp('when the LRC delivers a downlink report again (its route retries), sent or not sent, then the repeat changes nothing: the next downlink on that port stays queued', async ({ t, tp, device }) => {
  const [first, second, third] = [await send(t, device._id, 21, '2121'), await send(t, device._id, 21, '2121'), await send(t, device._id, 21, '2121')];
  assert.equal([first.status, second.status, third.status], [202, 202, 202]);
  await tp.transmit(EUI, 1);
  const report = tp.posted.at(-1)!;
  await eventually(async () => (await downlinkOf(t, device._id, first.body.commandId))?.status === 'sent', 10_000, 'the first sent');
  const again = await tp.post(...report);
  assert.is(again.status, 200, again.text);
  assert.equal(await outcomesOf(t, second.body.commandId), [], 'the second is still queued');
  await tp.transmit(EUI, 0, 'A3');
  await eventually(async () => (await downlinkOf(t, device._id, second.body.commandId))?.status === 'failed', 10_000, 'the second failed');
  assert.is((await tp.post(...tp.posted.at(-1)!)).status, 200);
  assert.equal(await outcomesOf(t, third.body.commandId), [], 'the third is still queued');
  await tp.transmit(EUI, 1);
  await eventually(async () => (await downlinkOf(t, device._id, third.body.commandId))?.status === 'sent', 10_000, 'the third sent');
  assert.equal(await outcomesOf(t, first.body.commandId), ['DownlinkSent']);
  assert.equal(await outcomesOf(t, second.body.commandId), ['DownlinkFailed']);
});

tp('when the queue is to be read or flushed, then 422 says ThingPark\'s API has no such call, and nothing is stored', async ({ t, tp, device }) => {
  tp.requests.length = 0;
  const before = (await downlinks(t, device._id)).length;
  const read = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'getDownlinks', callData: {} } });
  assert.is(read.status, 422);
  assert.is(read.text, "ERR - data.callName getDownlinks is not available with the ThingPark integration: ThingPark's DX API has no read of a device's downlink queue");
  const flush = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'clearDownlinks', callData: { devEui: EUI } } });
  assert.is(flush.status, 422);
  assert.match(flush.text, /^ERR - data\.callName clearDownlinks is not available with the ThingPark integration/);
  assert.is(tp.requests.length, 0);
  assert.is((await downlinks(t, device._id)).length, before);
});

tp('when ThingPark is down, then the command answers pending, is retried, queued once, and the connector shows failing, then ok', async ({ t, tp, device, connector }) => {
  tp.mode = 'down';
  const res = await send(t, device._id, 4, 'ff');
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'pending');
  const failing = await eventually(async () => {
    const c = await t.call('GET', `/api/connectors/${connector._id}`);
    return c.body.status === 'failing' ? c.body : undefined;
  }, 10_000, 'the connector to show failing');
  assert.match(failing.lastError, /cannot be reached/);
  assert.ok((await logsOf(t, connector._id)).some((l) => l.message.includes(res.body.commandId) && /attempt 1 failed/.test(l.message)));
  tp.mode = 'up';
  await eventually(async () => (await downlinkOf(t, device._id, res.body.commandId))?.status === 'queued', 20_000, 'the retried command');
  assert.is(tp.queueOf(EUI).filter((i) => i.fPort === 4 && i.payloadHex === 'ff').length, 1, 'queued once');
  await eventually(async () => (await t.call('GET', `/api/connectors/${connector._id}`)).body.status === 'ok', 10_000, 'ok again');
});

tp('when ThingPark refuses the device, then 502 with its message, logged on the connector, and nothing queued', async ({ t, tp, connector }) => {
  const other = await t.call('POST', '/api/iotnodes', { body: { name: 'unknown to ThingPark', connector: connector._id, devEui: STRANGER_EUI } });
  const res = await command(t, { command: 'apiCall', iotnodeId: other.body._id, data: { callName: 'sendDownlink', callData: { payload: { fPort: 1, payloadHex: '00' } } } });
  assert.is(res.status, 502, res.text);
  assert.match(res.text, new RegExp(`^ERR - ThingPark did not take the command: Device ${STRANGER_EUI.toUpperCase()} not found`));
  assert.is(tp.queueOf(STRANGER_EUI).length, 0);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes(`Device ${STRANGER_EUI.toUpperCase()} not found`)), 10_000, 'the refusal in the connector log');
  assert.is((await downlinks(t, other.body._id))[0]!.status, 'refused');
});

tp('when ThingPark refuses the client credentials, then 502 naming them, and the connector shows failing', async ({ t, tp }) => {
  const wrong = await t.call('POST', '/api/connectors', { body: { name: 'wrong secret', integration: 'ThingPark', thingPark: { url: tp.url, clientId: CLIENT_ID, clientSecret: 'not-the-secret' } } });
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'through the wrong connector', connector: wrong.body._id, devEui: EUI } });
  const res = await send(t, device.body._id, 1, '00');
  assert.is(res.status, 502, res.text);
  assert.match(res.text, /^ERR - ThingPark did not take the command: ThingPark refused the connector's client credentials: Bad client credentials/);
  const c = await eventually(async () => {
    const r = await t.call('GET', `/api/connectors/${wrong.body._id}`);
    return r.body.status === 'failing' ? r.body : undefined;
  }, 10_000, 'failing');
  assert.match(c.lastError, /client credentials/);
  assert.not.ok(c.lastError.includes('not-the-secret'));
});

tp('when ThingPark notifies a join, then the device log says so', async ({ t, tp, device }) => {
  const res = await tp.notification(EUI, 'join');
  assert.is(res.status, 200, res.text);
  await eventually(async () => (await logsOf(t, device._id)).some((l) => l.message === 'Joined the network as 0405F519'), 10_000, 'the join in the device log');
});

tp('when a report has no secret, a wrong one, or names an unknown connector, then 401, and the refusal is logged on the connector', async ({ t, tp, connector }) => {
  const url = tp.route!.url;
  const body = JSON.stringify({ DevEUI_uplink: { DevEUI: EUI, FPort: 1, FCntUp: 1, payload_hex: '00' } });
  const post = (target: string, headers: Record<string, string>) => fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  assert.is((await post(url, {})).status, 401);
  assert.is((await post(url, { authorization: 'Bearer not-the-secret' })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/thingpark/ffffffffffffffffffffffff`, { authorization: tp.route!.authorization })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/loriot/${connector._id}`, { authorization: tp.route!.authorization })).status, 401, "another integration's path");
  await eventually(async () => (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Webhook call refused')).length >= 2, 10_000, 'the refusals');
});

tp('when a report names a device the connector does not know, then nothing is stored and the connector log says so', async ({ t, tp, connector }) => {
  const before = (await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count');
  const res = await tp.uplink('0000000000000003', 1, Buffer.from('00', 'hex'));
  assert.equal([res.status, JSON.parse(res.text)], [200, { stored: 0 }]);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('devEui 0000000000000003')), 10_000, 'the connector log');
  assert.is((await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count'), before);
});

tp('when a report is malformed, then 422 naming the field, and nothing is stored; a kind of report the platform does not use is taken and not stored', async ({ t, tp, device }) => {
  const before = await t.call('GET', `/api/iotnodes/${device._id}`);
  const up = (fields: Record<string, unknown>) => ({ DevEUI_uplink: { DevEUI: EUI, FPort: 1, FCntUp: 9000, payload_hex: '00', ...fields } });
  const cases: [unknown, RegExp][] = [
    [[], /^ERR - body must be (a JSON )?object/],
    [{}, /^ERR - body must hold one report/],
    [{ ...up({}), DevEUI_notification: { DevEUI: EUI } }, /^ERR - body must hold one report/],
    [{ DevEUI_uplink: 'x' }, /^ERR - DevEUI_uplink must be an object$/],
    [up({ DevEUI: '0018B2' }), /^ERR - DevEUI_uplink\.DevEUI must be 16 hexadecimal digits$/],
    [up({ payload_hex: 'zz' }), /^ERR - DevEUI_uplink\.payload_hex must be hexadecimal/],
    [up({ payload_hex: 'ab'.repeat(300) }), /^ERR - DevEUI_uplink\.payload_hex is 300 bytes/],
    [up({ FPort: 300 }), /^ERR - DevEUI_uplink\.FPort must be a frame port/],
    [up({ FCntUp: 'many' }), /^ERR - DevEUI_uplink\.FCntUp must be a whole number$/],
    [{ DevEUI_downlink_Sent: { DevEUI: EUI, FPort: 1, DeliveryStatus: 7 } }, /^ERR - DevEUI_downlink_Sent\.DeliveryStatus must be 1/],
  ];
  for (const [body, message] of cases) {
    const res = await tp.post(body, EUI, '1');
    assert.is(res.status, 422, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    assert.match(res.text, message);
  }
  const location = await tp.post({ DevEUI_location: { DevEUI: EUI, DevLAT: 48.85, DevLON: 2.35 } }, EUI);
  assert.equal([location.status, JSON.parse(location.text)], [200, { stored: 0 }]);
  const after = await t.call('GET', `/api/iotnodes/${device._id}`);
  assert.equal(after.body.radio, before.body.radio);
  assert.is(after.body.temperature, before.body.temperature);
});

tp.run();
