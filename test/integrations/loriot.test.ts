import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';
import { LoriotStandIn } from '../standins/loriot.js';

const EUI = '70b3d57ed0052b21';
const STRANGER_EUI = '70b3d57ed0052bff';
const APPID = 'BE7A0123';
const TOKEN = 'loriot-application-token';

interface Ctx {
  t: TestPlatform;
  ns: LoriotStandIn;
  connector: Record<string, any>;
  device: Record<string, any>;
}

const lo = suite<Ctx>('LORIOT: uplinks through its HTTP Push output, downlinks through its REST API');

lo.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ns = await new LoriotStandIn(APPID, TOKEN, [EUI]).start();
  const res = await ctx.t.call('POST', '/api/connectors', { body: { name: 'city network', integration: 'Loriot', loriot: { url: ctx.ns.url, applicationId: APPID.toLowerCase(), token: TOKEN } } });
  assert.is(res.status, 201, res.text);
  ctx.connector = res.body;
  ctx.ns.output = { url: `${ctx.t.baseUrl}/api/integrations/loriot/${res.body._id}`, authorization: `Bearer ${res.body.webhookSecret}` };
  await givenTranslator(ctx.t);
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'street climate', connector: res.body._id, devEui: EUI.toUpperCase(), translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body;
});
lo.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.ns.stop();
});

const command = (t: TestPlatform, body: Record<string, unknown>) => t.call('PUT', '/api/iotnodes/command', { body });
const send = (t: TestPlatform, iotnodeId: string, fPort: number | string, payloadHex: string, confirmed?: boolean) =>
  command(t, { command: 'apiCall', iotnodeId, data: { callName: 'sendDownlink', callData: { devEui: EUI, payload: { fPort, payloadHex, ...(confirmed !== undefined ? { confirmed } : {}) } } } });
const downlinks = async (t: TestPlatform, deviceId: string) => (await t.call('GET', `/api/iotnodes/${deviceId}/downlinks`)).body as Record<string, any>[];
const statusOf = async (t: TestPlatform, deviceId: string, commandId: string) => (await downlinks(t, deviceId)).find((d) => d.commandId === commandId)?.status;
/** What the network server reported of a command, from its stream. */
const outcomesOf = async (t: TestPlatform, commandId: string) =>
  (await t.platform.deps.store.readStream(`command-${commandId}`)).map((e) => e.type).filter((type) => type.startsWith('Downlink'));
const temperatures = async (t: TestPlatform, deviceId: string) => (await t.call('GET', `/api/iotnodes/${deviceId}/stats?measurement=temperature&start=0`)).body.map((p: { value: number }) => p.value) as number[];

lo('when a connector is created, then its token is never returned, its webhook secret is returned once, and its settings are checked', async ({ t, connector }) => {
  assert.type(connector.webhookSecret, 'string');
  assert.is(connector.loriot.token, undefined);
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.is(read.body.status, 'ok');
  assert.is(read.body.loriot.applicationId, APPID.toLowerCase());
  assert.not.ok(read.text.includes(TOKEN));
  assert.not.ok(read.text.includes(connector.webhookSecret));
  const listed = (await t.call('GET', '/api/integrations')).body.find((i: { name: string }) => i.name === 'Loriot');
  assert.equal([listed.available, listed.webhook, listed.writeOnlySettings], [true, '/api/integrations/loriot/{connectorId}', ['loriot.token']]);
  for (const loriot of [{ url: 'https://eu1.loriot.io', token: 'x' }, { url: 'https://eu1.loriot.io', applicationId: 'BE7A01', token: 'x' }, { url: 'https://eu1.loriot.io', applicationId: APPID }]) {
    const bad = await t.call('POST', '/api/connectors', { body: { name: 'incomplete', integration: 'Loriot', loriot } });
    assert.is(bad.status, 422, JSON.stringify(loriot));
    assert.match(bad.text, /^ERR - loriot/);
  }
});

lo('when LORIOT pushes an rx message, then the device\'s translator decodes it into fields and history, with the radio metadata', async ({ t, ns, device }) => {
  const res = await ns.uplink(EUI, 1, Buffer.from(climateHex(19.5, 55, 3100), 'hex'));
  assert.is(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 19.5, 'the decoded temperature');
  assert.is(after.relativeHumidity, 55);
  assert.is(after.batteryVoltage, 3.1);
  assert.equal(after.encodedData, { hexEncoded: climateHex(19.5, 55, 3100), port: 1 });
  assert.equal(after.radio, { fCnt: 1, rssi: -108, snr: 1.2, frequency: 867900000, dataRate: 'SF12 BW125 4/5', spreadingFactor: 12 });
  assert.equal(await temperatures(t, device._id), [19.5]);
  assert.ok((await t.call('GET', `/api/iotnodes/${device._id}/stats/fields`)).body.includes('radio.rssi'));
});

lo('when LORIOT pushes the same rx twice, or the gw message of the frame after it, then the frame is stored once', async ({ t, ns, device }) => {
  const frame = { cmd: 'rx', seqno: 7001, EUI: EUI.toUpperCase(), ts: Date.now(), fcnt: 42, port: 1, ack: false, data: climateHex(23, 40, 3000) };
  assert.is((await ns.push(frame)).status, 200);
  assert.is((await ns.push(frame)).status, 200);
  await deviceWhen(t, device._id, (d) => d.temperature === 23, 'the frame');
  const gw = await ns.push({ ...frame, cmd: 'gw', gws: [{ rssi: -90, snr: 3, gweui: '7076FFFFFF053A13' }] });
  assert.is(gw.status, 200, gw.text);
  assert.equal(JSON.parse(gw.text), { stored: 0 });
  assert.equal((await temperatures(t, device._id)).filter((v) => v === 23), [23]);
});

lo('when an rx message carries every gateway\'s view (the full radio verbosity), then the best gateway and the count are kept', async ({ t, ns, device }) => {
  const res = await ns.uplink(EUI, 1, Buffer.from(climateHex(20.25, 50, 3000), 'hex'), {
    rssi: undefined,
    snr: undefined,
    gws: [
      { rssi: -115, snr: -9, gweui: '7076FFFFFF053B07' },
      { rssi: -96, snr: 4.5, gweui: '7076FFFFFF053A13' },
    ],
  });
  assert.is(res.status, 200, res.text);
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 20.25, 'the frame with gateways');
  assert.equal([after.radio.gateways, after.radio.gatewayId, after.radio.rssi, after.radio.snr], [2, '7076ffffff053a13', -96, 4.5]);
});

lo('when LORIOT sends a frame encrypted (no AppSKey at LORIOT), then its radio metadata is stored, nothing is decoded, and the device log says why', async ({ t, ns, device }) => {
  const before = await t.call('GET', `/api/iotnodes/${device._id}`);
  const res = await ns.uplink(EUI, 1, Buffer.alloc(0), { data: undefined, encdata: 'A1B2C3D4E5', fcnt: 77 });
  assert.is(res.status, 200, res.text);
  const after = await deviceWhen(t, device._id, (d) => d.radio?.fCnt === 77, 'the encrypted frame');
  assert.is(after.temperature, before.body.temperature);
  await eventually(async () => (await logsOf(t, device._id)).some((l) => l.message.includes('encrypted (encdata)')), 10_000, 'the note');
});

lo('when a downlink is queued, then LORIOT gets exactly the documented tx message with the application token, and the item is queued', async ({ t, ns, device }) => {
  ns.requests.length = 0;
  const res = await send(t, device._id, '10', '0A0B', true);
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  assert.is(ns.requests.length, 1);
  const [post] = ns.requests;
  assert.equal([post!.method, post!.path], ['POST', '/1/rest']);
  assert.is(post!.headers.authorization, `Bearer ${TOKEN}`);
  assert.is(post!.headers['content-type'], 'application/json');
  assert.equal(post!.body, { cmd: 'tx', appid: APPID, EUI: EUI.toUpperCase(), port: 10, confirmed: true, data: '0a0b' });
  assert.equal(ns.queueOf(EUI).map((i) => [i.port, i.data, i.confirmed]), [[10, '0a0b', true]]);
  const [item] = await downlinks(t, device._id);
  assert.is(item!.commandId, res.body.commandId);
  assert.equal([item!.status, item!.fPort, item!.data, item!.confirmed], ['queued', 10, '0a0b', true]);
});

lo('when the device\'s receive window takes the item (txd), then it is sent; the ACK bit of its next uplink makes it acked', async ({ t, ns, device }) => {
  const queued = (await downlinks(t, device._id)).find((d) => d.status === 'queued')!;
  const item = await ns.transmit(EUI);
  assert.equal([item!.port, item!.data], [10, '0a0b']);
  await eventually(async () => (await statusOf(t, device._id, queued.commandId)) === 'sent', 10_000, 'sent');
  const res = await ns.uplink(EUI, 1, Buffer.from(climateHex(21, 45, 3000), 'hex'), { ack: true });
  assert.equal(JSON.parse(res.text), { stored: 2 });
  await eventually(async () => (await statusOf(t, device._id, queued.commandId)) === 'acked', 10_000, 'acked');
});

lo('when several downlinks wait, then each txd moves the one it transmitted, in queue order, and a txd for nothing queued is logged', async ({ t, ns, device, connector }) => {
  const first = await send(t, device._id, 3, '01');
  const second = await send(t, device._id, 3, '02');
  assert.equal([first.status, second.status], [202, 202]);
  await ns.transmit(EUI);
  await eventually(async () => (await statusOf(t, device._id, first.body.commandId)) === 'sent', 10_000, 'the first sent');
  assert.is(await statusOf(t, device._id, second.body.commandId), 'queued');
  await ns.transmit(EUI);
  await eventually(async () => (await statusOf(t, device._id, second.body.commandId)) === 'sent', 10_000, 'the second sent');
  const stray = await ns.push({ cmd: 'txd', EUI: EUI.toUpperCase(), seqdn: 99, seqq: 99, ts: Date.now(), port: 9, data: 'FF' });
  assert.equal([stray.status, JSON.parse(stray.text)], [200, { stored: 0 }]);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('a queued downlink on port 9 with payload ff')), 10_000, 'the stray txd logged');
});

lo('when LORIOT delivers a txd again, or an rx with the ACK bit again, then the repeat changes nothing: the next matching downlink stays queued, an older one sent stays unacknowledged', async ({ t, ns, device }) => {
  const first = await send(t, device._id, 4, '07', true);
  const second = await send(t, device._id, 4, '07', true);
  assert.equal([first.status, second.status], [202, 202]);
  await ns.transmit(EUI);
  const txd = ns.pushed.at(-1);
  await eventually(async () => (await statusOf(t, device._id, first.body.commandId)) === 'sent', 10_000, 'the first sent');
  const again = await ns.push(txd);
  assert.is(again.status, 200, again.text);
  assert.equal(await outcomesOf(t, second.body.commandId), [], 'the second is still queued');
  assert.equal(ns.queueOf(EUI).length, 1);

  await ns.transmit(EUI);
  await eventually(async () => (await statusOf(t, device._id, second.body.commandId)) === 'sent', 10_000, 'the second sent');
  await ns.uplink(EUI, 1, Buffer.from(climateHex(22, 45, 3000), 'hex'), { ack: true });
  const rx = ns.pushed.at(-1);
  await eventually(async () => (await statusOf(t, device._id, second.body.commandId)) === 'acked', 10_000, 'the second acked');
  assert.is((await ns.push(rx)).status, 200);
  assert.equal(await outcomesOf(t, first.body.commandId), ['DownlinkSent'], 'the first is sent, not acknowledged');
  assert.equal(await outcomesOf(t, second.body.commandId), ['DownlinkSent', 'DownlinkAcked']);
});

lo('when LORIOT delivers one txd twice at the same time, then one downlink is sent and the next that matches stays queued', async ({ t, ns, device }) => {
  const first = await send(t, device._id, 5, '0909');
  const second = await send(t, device._id, 5, '0909');
  assert.equal([first.status, second.status], [202, 202]);
  const item = ns.queueOf(EUI).shift()!;
  const txd = { cmd: 'txd', EUI: EUI.toUpperCase(), seqdn: 500, seqq: item.seqq, ts: Date.now(), port: item.port, data: item.data.toUpperCase() };
  const answers = await Promise.all([ns.push(txd), ns.push(txd)]);
  assert.equal(answers.map((a) => a.status), [200, 200], answers.map((a) => a.text).join(' '));
  assert.equal(await outcomesOf(t, first.body.commandId), ['DownlinkSent']);
  assert.equal(await outcomesOf(t, second.body.commandId), []);
  await ns.transmit(EUI);
  await eventually(async () => (await statusOf(t, device._id, second.body.commandId)) === 'sent', 10_000, 'the second sent');
});

lo('when the queue is flushed, then LORIOT gets its flushqueue call and the queued items are flushed; a read of the queue is 422, since LORIOT has none', async ({ t, ns, device }) => {
  const waiting = await send(t, device._id, 2, 'aa');
  assert.is(waiting.status, 202, waiting.text);
  ns.requests.length = 0;
  const flush = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'clearDownlinks', callData: { devEui: EUI } } });
  assert.is(flush.status, 202, flush.text);
  assert.is(flush.body.status, 'done');
  const [call] = ns.requests;
  assert.equal([call!.method, call!.path, call!.body, call!.headers.authorization], ['POST', `/1/nwk/app/${APPID}/device/${EUI.toUpperCase()}/flushqueue`, {}, `Bearer ${TOKEN}`]);
  assert.is(ns.queueOf(EUI).length, 0);
  await eventually(async () => (await statusOf(t, device._id, waiting.body.commandId)) === 'flushed', 10_000, 'flushed');
  const read = await command(t, { command: 'apiCall', iotnodeId: device._id, data: { callName: 'getDownlinks', callData: { devEui: EUI } } });
  assert.is(read.status, 422);
  assert.is(read.text, "ERR - data.callName getDownlinks is not available with the Loriot integration: LORIOT's API has no read of a device's downlink queue");
});

lo('when LORIOT is down, then the command answers pending, is retried, queued once, and the connector shows failing, then ok', async ({ t, ns, device, connector }) => {
  ns.mode = 'down';
  const res = await send(t, device._id, 4, 'ff');
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'pending');
  const failing = await eventually(async () => {
    const c = await t.call('GET', `/api/connectors/${connector._id}`);
    return c.body.status === 'failing' ? c.body : undefined;
  }, 10_000, 'the connector to show failing');
  assert.match(failing.lastError, /cannot be reached/);
  assert.ok((await logsOf(t, connector._id)).some((l) => l.message.includes(res.body.commandId) && /attempt 1 failed/.test(l.message)));
  ns.mode = 'up';
  await eventually(async () => (await statusOf(t, device._id, res.body.commandId)) === 'queued', 20_000, 'the retried command');
  assert.is(ns.queueOf(EUI).filter((i) => i.port === 4 && i.data === 'ff').length, 1, 'queued once');
  await eventually(async () => (await t.call('GET', `/api/connectors/${connector._id}`)).body.status === 'ok', 10_000, 'ok again');
});

lo('when LORIOT answers 503, then the command is tried again and queued once, within the wait of the request', async ({ t, ns, device, connector }) => {
  ns.mode = 'failing';
  ns.requests.length = 0;
  const pending = send(t, device._id, 5, 'ee');
  await eventually(async () => ns.requests.length > 0, 10_000, 'the first attempt');
  ns.mode = 'up';
  const res = await pending;
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  assert.is(ns.requests.filter((r) => r.path === '/1/rest').length, 2);
  assert.is(ns.queueOf(EUI).filter((i) => i.port === 5 && i.data === 'ee').length, 1, 'queued once');
  assert.ok((await logsOf(t, connector._id)).some((l) => l.message.includes(res.body.commandId) && /answered 503/.test(l.message)));
});

lo('when LORIOT refuses, then 502 with its message, logged on the connector, and nothing queued', async ({ t, ns, connector }) => {
  const other = await t.call('POST', '/api/iotnodes', { body: { name: 'unknown to LORIOT', connector: connector._id, devEui: STRANGER_EUI } });
  const res = await command(t, { command: 'apiCall', iotnodeId: other.body._id, data: { callName: 'sendDownlink', callData: { payload: { fPort: 1, payloadHex: '00' } } } });
  assert.is(res.status, 502, res.text);
  assert.match(res.text, new RegExp(`^ERR - Loriot did not take the command: Device ${STRANGER_EUI.toUpperCase()} not found`));
  assert.is(ns.queueOf(STRANGER_EUI).length, 0);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes(`Device ${STRANGER_EUI.toUpperCase()} not found`)), 10_000, 'the refusal in the connector log');
  const [item] = await downlinks(t, other.body._id);
  assert.is(item!.status, 'refused');
});

lo('when a push has no secret, a wrong one, or names an unknown connector, then 401, and the refusal is logged on the connector', async ({ t, ns, connector }) => {
  const url = ns.output!.url;
  const body = JSON.stringify({ cmd: 'rx', EUI, port: 1, fcnt: 1, data: '00' });
  const post = (target: string, headers: Record<string, string>) => fetch(target, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  assert.is((await post(url, {})).status, 401);
  assert.is((await post(url, { authorization: 'Bearer not-the-secret' })).status, 401);
  assert.is((await post(url, { authorization: TOKEN })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/loriot/ffffffffffffffffffffffff`, { authorization: ns.output!.authorization })).status, 401);
  assert.is((await post(`${t.baseUrl}/api/integrations/thingpark/${connector._id}`, { authorization: ns.output!.authorization })).status, 401, "another integration's path");
  await eventually(async () => (await logsOf(t, connector._id)).filter((l) => l.message.startsWith('Webhook call refused')).length >= 3, 10_000, 'the refusals');
});

lo('when an rx message names a device the connector does not know, then nothing is stored and the connector log says so', async ({ t, ns, connector }) => {
  const before = (await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count');
  const res = await ns.uplink('0000000000000002', 1, Buffer.from('00', 'hex'));
  assert.equal([res.status, JSON.parse(res.text)], [200, { stored: 0 }]);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.includes('devEui 0000000000000002')), 10_000, 'the connector log');
  assert.is((await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count'), before);
});

lo('when a pushed message is malformed, then 422 naming the field, logged on the connector, and nothing is stored; an unknown kind of message is taken and not stored', async ({ t, ns, device, connector }) => {
  const before = await t.call('GET', `/api/iotnodes/${device._id}`);
  const cases: [unknown, RegExp][] = [
    [[], /^ERR - body must be (a JSON )?object/],
    [{ EUI, port: 1, data: '00' }, /^ERR - cmd is required/],
    [{ cmd: 'rx', EUI: 'xyz', port: 1, data: '00' }, /^ERR - EUI must be 16 hexadecimal digits$/],
    [{ cmd: 'rx', EUI, port: 1, data: 'not hex' }, /^ERR - data must be hexadecimal/],
    [{ cmd: 'rx', EUI, port: 1, data: 'abc' }, /^ERR - data must be hexadecimal/],
    [{ cmd: 'rx', EUI, port: 300, data: '00' }, /^ERR - port must be a frame port/],
    [{ cmd: 'rx', EUI, port: '1', data: '00' }, /^ERR - port must be a frame port/],
    [{ cmd: 'rx', EUI, port: 1, fcnt: -1, data: '00' }, /^ERR - fcnt /],
    [{ cmd: 'rx', EUI, port: 1, data: 'ab'.repeat(300) }, /^ERR - data is 300 bytes/],
    [{ cmd: 'txd', EUI, seqdn: 1, port: 1, data: 'xx' }, /^ERR - data must be hexadecimal/],
  ];
  for (const [body, message] of cases) {
    const res = await ns.push(body);
    assert.is(res.status, 422, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    assert.match(res.text, message);
  }
  const raw = await fetch(ns.output!.url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: ns.output!.authorization }, body: '{"cmd": "rx", ' });
  assert.is(raw.status, 422, 'JSON that does not parse');
  const other = await ns.push({ cmd: 'mtxd', EUI, seqdn: 1 });
  assert.equal([other.status, JSON.parse(other.text)], [200, { stored: 0 }]);
  await eventually(async () => (await logsOf(t, connector._id)).some((l) => l.message.startsWith('Webhook call refused: ERR - EUI must be')), 10_000, 'the refusal logged');
  const after = await t.call('GET', `/api/iotnodes/${device._id}`);
  assert.equal(after.body.radio, before.body.radio);
  assert.is(after.body.temperature, before.body.temperature);
});

lo.run();
