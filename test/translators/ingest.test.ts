import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';
import { rebuild } from '../../projections/rebuild.js';
import { refusing } from '../support/refusing.js';
import { climateHex, climateSensor, dailyTemperature, deviceWhen, gateway, givenDevice, givenTranslator, logsAtLeast, logsOf, settle, uplink } from './given.js';
import { whileLocked } from '../support/locked.js';

const ROOT = 'svc/generic/v2/translators';

/**
 * Runs `during` while another transaction holds `es.events`, so ingest's
 * appends wait (reads go on), then lets them through.
 */
const whileAppendsWait = <T>(t: TestPlatform, during: () => Promise<T>): Promise<T> => whileLocked(t.platform.deps.db, 'es.events', during);

const ingest = suite<{ t: TestPlatform; p: Provider }>('Translators at ingest: decoding over MQTT and HTTP');

ingest.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'translators', [`${ROOT}/climate`, `${ROOT}/chain`, `${ROOT}/gateway`, `${ROOT}/ahead`, `${ROOT}/hub`, `${ROOT}/hub-sensor`]);
  await givenTranslator(ctx.t, { name: 'acme-climate', version: '1.0.0', match: { deviceModelName: 'acme-th-01' } });
  await givenTranslator(ctx.t, {
    name: 'daily-temperature',
    version: '1.0.0',
    match: {},
    description: 'Daily maximum and mean of `temperature`, per day of `reportedAt`.',
    parameters: { highAlarmAbove: { type: 'number', description: 'Alarm when the day maximum exceeds it (°C).', default: 30 } },
    spec: dailyTemperature.spec,
    code: dailyTemperature.code,
  });
});
ingest.after(async (ctx) => {
  await ctx.t.stop();
});

ingest('given an MQTT device, when its model name is set after the first message, then the next raw uplink is decoded by the matching translator', async ({ t, p }) => {
  const topic = `${ROOT}/climate`;
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { encodedData: { hexEncoded: climateHex(19.25, 41, 3010), port: 1 } });
  const first = await deviceOf(t, topic);
  assert.equal(first.encodedData, { hexEncoded: climateHex(19.25, 41, 3010), port: 1 }, 'no translator yet: the raw uplink is stored as it came');
  assert.is(first.temperature, undefined);

  const put = await t.call('PUT', `/api/iotnodes/${first._id}`, { body: { deviceModelName: 'acme-th-01' } });
  assert.is(put.status, 200, put.text);
  await publish(c, topic, { encodedData: { hexEncoded: climateHex(21.5, 55.5, 2950), port: 1 }, rssi: -70 });
  const decoded = await deviceWhen(t, first._id, (d) => d.temperature !== undefined, 'the decoded uplink');
  assert.is(decoded.temperature, 21.5);
  assert.is(decoded.relativeHumidity, 55.5);
  assert.is(decoded.batteryVoltage, 2.95);
  assert.is(decoded.rssi, -70, 'the uplink’s other fields are kept');
  await c.endAsync();
  await settle(t);
  assert.equal(await logsOf(t, first._id), [], 'a successful translation writes no log');
});

ingest('given a device with preferences, when a raw uplink is posted over HTTP, then 200 answers the decoded device and no log is written', async ({ t }) => {
  const device = await givenDevice(t, { name: 'http climate', translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] });
  const after = await uplink(t, device._id, climateHex(-4.5, 80, 3300));
  assert.is(after.temperature, -4.5);
  assert.is(after.relativeHumidity, 80);
  assert.is(after.batteryVoltage, 3.3);
  const history = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature`);
  assert.equal(history.body.map((x: any) => x.value), [-4.5], 'decoded fields have history like any reported field');
  await settle(t);
  assert.equal(await logsOf(t, device._id), []);
});

ingest('given a decoder and a chained analytics translator, when uplinks arrive over MQTT and HTTP, then the chain accumulates per day of reportedAt with its own previous output', async ({ t, p }) => {
  const topic = `${ROOT}/chain`;
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { hello: true });
  const device = await deviceOf(t, topic);
  const put = await t.call('PUT', `/api/iotnodes/${device._id}`, {
    body: {
      translatorPreferences: [
        { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
        { name: 'daily-temperature', version: '1.0.0', upgradePolicy: 'none', parameters: { highAlarmAbove: 24 } },
      ],
    },
  });
  assert.is(put.status, 200, put.text);

  await publish(c, topic, { encodedData: { hexEncoded: climateHex(20, 40, 3000), port: 1 } });
  let d = await deviceWhen(t, device._id, (x) => x.temperatureDayCount === 1, 'the first chained result');
  assert.is(d.temperatureDayMax, 20);
  assert.is(d.temperatureHighAlarm, false);
  assert.is(d.temperatureDay, d.reportedAt.slice(0, 10), 'the period comes from reportedAt');

  d = await uplink(t, device._id, climateHex(26, 40, 3000));
  assert.is(d.temperatureDayCount, 2);
  assert.is(d.temperatureDayMax, 26);
  assert.is(d.temperatureHighAlarm, true, 'the preference’s parameter overrides the default of 30');

  await publish(c, topic, { encodedData: { hexEncoded: climateHex(23, 40, 3000), port: 1 } });
  d = await deviceWhen(t, device._id, (x) => x.temperatureDayCount === 3, 'the third chained result');
  assert.is(d.temperatureDayMax, 26);
  assert.is(d.temperatureDayMean, 23);
  assert.is(d.temperature, 23);
  await c.endAsync();
});

ingest('given a chained translator without a preference parameter, when it runs, then it gets the declared defaults', async ({ t }) => {
  const device = await givenDevice(t, {
    name: 'defaults',
    translatorPreferences: [
      { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'daily-temperature', version: '1.0.0', upgradePolicy: 'none' },
    ],
  });
  assert.is((await uplink(t, device._id, climateHex(26, 40, 3000))).temperatureHighAlarm, false);
  assert.is((await uplink(t, device._id, climateHex(31, 40, 3000))).temperatureHighAlarm, true);
});

ingest('given a gateway decoder, when it returns additionalDeviceUpdates, then each sub-device named by its secret gets its result as its own report', async ({ t }) => {
  await givenTranslator(t, { name: 'acme-gateway', match: {}, spec: gateway.spec, code: gateway.code });
  const gw = await givenDevice(t, { name: 'gateway', translatorPreferences: [{ name: 'acme-gateway', version: '1.0.0', upgradePolicy: 'none' }] });
  const a = await givenDevice(t, { name: 'sensor a', secret: 'sensor-0000000a' });
  const b = await givenDevice(t, { name: 'sensor b', secret: 'sensor-0000000b' });
  const installer = await givenUser(t, 'gateway-stranger', { attributes: { roles: ['installer'] } });
  const foreign = await t.call('POST', '/api/iotnodes', { token: installer.token, body: { name: 'another owner’s sensor', secret: 'sensor-0000000c' } });
  assert.is(foreign.status, 201, foreign.text);
  const frame = (sensors: [string, number][]) =>
    Buffer.concat([Buffer.from([sensors.length]), ...sensors.map(([id, tenths]) => {
      const b6 = Buffer.alloc(6);
      Buffer.from(id, 'hex').copy(b6, 0);
      b6.writeInt16BE(tenths, 4);
      return b6;
    })]).toString('hex');
  const after = await uplink(t, gw._id, frame([['0000000a', 215], ['0000000b', -32], ['0000000c', 100], ['000000ff', 50]]));
  assert.is(after.connectedSensors, 4);
  assert.is(after.temperature, undefined, 'the sub-devices’ fields are not written on the gateway');
  const sa = await t.call('GET', `/api/iotnodes/${a._id}`);
  const sb = await t.call('GET', `/api/iotnodes/${b._id}`);
  assert.is(sa.body.temperature, 21.5);
  assert.is(sb.body.temperature, -3.2);
  assert.ok(sa.body.reportedAt, 'a sub-device update is a report of that device');
  assert.is((await t.call('GET', `/api/iotnodes/${foreign.body._id}`)).body.temperature, undefined, 'a device of another owner is never updated');
  const logs = await logsAtLeast(t, gw._id, 2);
  assert.ok(logs.some((l) => l.message.includes('"sensor-0000000c"') && l.type === 'debug' && l.category === 'system'));
  assert.ok(logs.some((l) => l.message.includes('"sensor-000000ff"')));
});

ingest('given a gateway decoder, when a sub-device\'s report cannot be stored, then the uplink fails and stores nothing; its retry stores each report once', async ({ t }) => {
  await givenTranslator(t, { name: 'acme-gateway-atomic', match: {}, spec: gateway.spec, code: gateway.code });
  const gw = await givenDevice(t, { name: 'atomic gateway', translatorPreferences: [{ name: 'acme-gateway-atomic', version: '1.0.0', upgradePolicy: 'none' }] });
  const sub = await givenDevice(t, { name: 'atomic sensor', secret: 'sensor-0000002a' });
  // One sensor, 0000002a at 20.5 °C.
  const frame = '01' + '0000002a' + '00cd';
  const reports = async (id: string) => (await t.platform.deps.store.readStream(`device-${id}`)).filter((e) => e.type === 'DeviceReported').length;
  const before = [await reports(gw._id), await reports(sub._id)];
  let failed: { status: number; text: string } | null = null;
  await refusing(t.platform.deps.db, 'es.events', `NEW.stream_id = 'device-${sub._id}'`, async () => {
    failed = await t.call('POST', `/api/iotnodes/${gw._id}/uplinks`, { body: { encodedData: { hexEncoded: frame, port: 1 } } });
  });
  assert.is(failed!.status, 500, failed!.text);
  assert.equal([await reports(gw._id), await reports(sub._id)], before, 'neither report stored');
  const after = await uplink(t, gw._id, frame);
  assert.is(after.connectedSensors, 1);
  assert.is((await t.call('GET', `/api/iotnodes/${sub._id}`)).body.temperature, 20.5);
  assert.equal([await reports(gw._id), await reports(sub._id)], [before[0]! + 1, before[1]! + 1], 'each report stored once');
});

ingest('given a chain whose later translator throws, when an uplink is decoded, then the earlier result is kept and no log is written', async ({ t }) => {
  await givenTranslator(t, {
    name: 'always-throws',
    match: {},
    spec: { comfortIndex: { type: 'number', unit: '', quantity: 'comfortIndex' } },
    code: 'function translate(iotnode) { throw new Error("comfort model not calibrated"); }',
  });
  const device = await givenDevice(t, {
    name: 'later throws',
    translatorPreferences: [
      { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'always-throws', version: '1.0.0', upgradePolicy: 'none' },
    ],
  });
  const after = await uplink(t, device._id, climateHex(18, 50, 3100));
  assert.is(after.temperature, 18);
  assert.is(after.comfortIndex, undefined);
  await settle(t);
  assert.equal(await logsOf(t, device._id), []);
});

ingest('given a gateway device on MQTT, when its decoder returns additionalDeviceUpdates, then each sub-device named by its secret gets its result as its own report', async ({ t, p }) => {
  await givenTranslator(t, { name: 'acme-gateway-mqtt', match: {}, spec: gateway.spec, code: gateway.code });
  const topic = `${ROOT}/gateway`;
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { hello: true });
  const gw = await deviceOf(t, topic);
  const put = await t.call('PUT', `/api/iotnodes/${gw._id}`, { body: { translatorPreferences: [{ name: 'acme-gateway-mqtt', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(put.status, 200, put.text);
  const a = await givenDevice(t, { name: 'mqtt sensor a', secret: 'sensor-0000001a' });
  const b = await givenDevice(t, { name: 'mqtt sensor b', secret: 'sensor-0000001b' });
  // Two sensors: 0000001a at 23.4 °C, 0000001b at -1.5 °C.
  await publish(c, topic, { encodedData: { hexEncoded: '02' + '0000001a' + '00ea' + '0000001b' + 'fff1', port: 1 } });
  const after = await deviceWhen(t, gw._id, (d) => d.connectedSensors === 2, 'the decoded gateway uplink');
  assert.is(after.temperature, undefined, 'the sub-devices’ fields are not written on the gateway');
  const sa = await deviceWhen(t, a._id, (d) => d.temperature !== undefined, 'sub-device a');
  const sb = await deviceWhen(t, b._id, (d) => d.temperature !== undefined, 'sub-device b');
  assert.is(sa.temperature, 23.4);
  assert.is(sb.temperature, -1.5);
  assert.ok(sa.reportedAt, 'a sub-device update is a report of that device');
  await c.endAsync();
  await settle(t);
  assert.equal(await logsOf(t, gw._id), [], 'every identifier matched: no log entry');
});

ingest('given a decoder and two chained translators, when uplinks arrive, then the second reads the first’s output; when the last throws, the first two results are kept and no log is written', async ({ t }) => {
  await givenTranslator(t, {
    name: 'day-max-fahrenheit',
    match: {},
    description: 'The daily maximum of `temperatureDayMax` in °F, for displays that want it.',
    spec: { temperatureDayMaxFahrenheit: { type: 'number', unit: '', quantity: 'temperatureFahrenheit' } },
    code: `function translate(iotnode) {
  if (iotnode.temperature < 0) throw new Error('below freezing: no display');
  if (typeof iotnode.temperatureDayMax !== 'number') return {};
  return { result: { temperatureDayMaxFahrenheit: _.round(iotnode.temperatureDayMax * 9 / 5 + 32, 1) } };
}`,
  });
  const device = await givenDevice(t, {
    name: 'three translators',
    translatorPreferences: [
      { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'daily-temperature', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'day-max-fahrenheit', version: '1.0.0', upgradePolicy: 'none' },
    ],
  });
  let d = await uplink(t, device._id, climateHex(20, 40, 3000));
  assert.is(d.temperatureDayMax, 20);
  assert.is(d.temperatureDayMaxFahrenheit, 68, 'the second chained translator read the first one’s output of this uplink');
  d = await uplink(t, device._id, climateHex(25, 40, 3000));
  assert.is(d.temperatureDayMaxFahrenheit, 77);

  d = await uplink(t, device._id, climateHex(-2, 40, 3000));
  assert.is(d.temperature, -2, 'the decoder’s result is kept');
  assert.is(d.temperatureDayCount, 3, 'the first chained translator’s result is kept');
  assert.is(d.temperatureDayMean, 14.33);
  assert.is(d.temperatureDayMaxFahrenheit, 77, 'the throwing translator wrote nothing');
  await settle(t);
  assert.equal(await logsOf(t, device._id), [], 'a later translator that throws writes no log');
});

ingest('given a decoder and a chained translator, when the decoder fails on an uplink, then the chained translator still sees that uplink’s other fields on the next one', async ({ t }) => {
  await givenTranslator(t, {
    name: 'label-echo',
    match: {},
    spec: { labelSeen: 'string' },
    code: `function translate(iotnode) { return typeof iotnode.label === 'string' ? { result: { labelSeen: iotnode.label } } : {}; }`,
  });
  const device = await givenDevice(t, {
    name: 'label reader',
    translatorPreferences: [
      { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'label-echo', version: '1.0.0', upgradePolicy: 'none' },
    ],
  });
  const first = await uplink(t, device._id, climateHex(20, 40, 3000));
  assert.is(first.labelSeen, undefined);
  // Two bytes: the decoder throws, the report is stored undecoded with its label.
  const failed = await uplink(t, device._id, '0102', 1, { label: 'north' });
  assert.is(failed.label, 'north');
  assert.is(failed.temperature, 20);
  await logsAtLeast(t, device._id, 1);
  const next = await uplink(t, device._id, climateHex(21, 40, 3000));
  assert.is(next.temperature, 21);
  assert.is(next.labelSeen, 'north', 'the chained translator saw the field of the undecoded report');
});

/** The device on `${ROOT}/ahead`, with the climate decoder through its model, and a connection of its provider. */
async function givenDecoderDevice(t: TestPlatform, p: Provider) {
  const topic = `${ROOT}/ahead`;
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { hello: true });
  const device = await deviceOf(t, topic);
  assert.is((await t.call('PUT', `/api/iotnodes/${device._id}`, { body: { deviceModelName: 'acme-th-01' } })).status, 200);
  return { topic, c, device };
}

ingest('given a device with a decoder, when a batch waits for its commit, then the next uplink is decoded meanwhile, and both are stored decoded and in order', async ({ t, p }) => {
  const { topic, c, device } = await givenDecoderDevice(t, p);

  const { calls, first, second } = await whileAppendsWait(t, async () => {
    const calls = t.platform.translation.calls;
    let firstAcked = false;
    const first = publish(c, topic, { encodedData: { hexEncoded: climateHex(18, 40, 3000), port: 1 } }).then(() => (firstAcked = true));
    await eventually(async () => t.platform.translation.calls === calls + 1, 5000, 'the first uplink decoded');
    await new Promise((r) => setTimeout(r, 50));
    const second = publish(c, topic, { encodedData: { hexEncoded: climateHex(19, 41, 3001), port: 1 } });
    await eventually(async () => t.platform.translation.calls === calls + 2, 5000, 'the second uplink decoded while the first waits');
    assert.not.ok(firstAcked, 'the first uplink is not stored yet');
    return { calls, first, second };
  });
  await Promise.all([first, second]);
  assert.is(t.platform.translation.calls, calls + 2, 'each uplink decoded once');
  const after = await deviceWhen(t, device._id, (d) => d.temperature === 19, 'the second uplink');
  assert.is(after.batteryVoltage, 3.001);
  const history = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature`);
  assert.equal(history.body.map((x: any) => x.value), [18, 19], 'both decoded, in the order they came');
  await c.endAsync();
});

ingest('given a device with a decoder, when a burst of uplinks arrives together while a batch waits, then each is decoded once, ahead of its batch, and all are stored decoded and in order', async ({ t, p }) => {
  const { topic, c, device } = await givenDecoderDevice(t, p);
  const temperatures = Array.from({ length: 30 }, (_, i) => 30 + i);
  const { calls, sent } = await whileAppendsWait(t, async () => {
    const calls = t.platform.translation.calls;
    const sent = Promise.all(temperatures.map((x, i) => publish(c, topic, { encodedData: { hexEncoded: climateHex(x, 40, 3100 + i), port: 1 } })));
    await eventually(async () => t.platform.translation.calls === calls + temperatures.length, 5000, 'the burst decoded while the batch waits');
    return { calls, sent };
  });
  await sent;
  assert.is(t.platform.translation.calls, calls + temperatures.length, 'each uplink decoded once');
  await deviceWhen(t, device._id, (d) => d.temperature === temperatures.at(-1), 'the last uplink of the burst');
  const history = await t.call('GET', `/api/iotnodes/${device._id}/stats?measurement=temperature`);
  assert.equal(history.body.map((x: any) => x.value).slice(-temperatures.length), temperatures, 'all decoded, in the order they came');
  await c.endAsync();
});

ingest('given a gateway decoded as its uplink arrives, when a report of its sub-device is ahead of it in the batch, then the sub-device’s chained translator does not see the gateway’s update yet', async ({ t, p }) => {
  const hub = `${ROOT}/hub`;
  const sensor = `${ROOT}/hub-sensor`;
  await givenTranslator(t, {
    name: 'hub-gateway',
    match: {},
    spec: { connectedSensors: { type: 'number', unit: '', quantity: 'count' }, temperature: { type: 'number', unit: '°C', quantity: 'temperature' } },
    code: `function translate({ encodedData }) {
      return { result: { connectedSensors: 1 }, additionalDeviceUpdates: [{ identifier: '${sensor}', result: { temperature: parseInt(encodedData.hexEncoded, 16) } }] };
    }`,
  });
  await givenTranslator(t, {
    name: 'seen-temperature',
    match: {},
    spec: { seenTemperature: { type: 'number', unit: '°C', quantity: 'temperature' } },
    code: `function translate(iotnode) { return { result: { seenTemperature: iotnode.temperature === undefined ? -273 : iotnode.temperature } }; }`,
  });
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, hub, { hello: true });
  await publish(c, sensor, { hello: true });
  const gw = await deviceOf(t, hub);
  const sub = await deviceOf(t, sensor);
  // The sensor's first preference is its hardware decoder; the chained translator runs on every report.
  for (const [device, names] of [[gw, ['hub-gateway']], [sub, ['acme-climate', 'seen-temperature']]] as const) {
    const put = await t.call('PUT', `/api/iotnodes/${device._id}`, { body: { translatorPreferences: names.map((name) => ({ name, version: '1.0.0', upgradePolicy: 'none' })) } });
    assert.is(put.status, 200, put.text);
  }
  await publish(c, sensor, { n: 1 });
  await deviceWhen(t, sub._id, (d) => d.n === 1 && d.seenTemperature === -273, 'the sensor’s first report, its chain run');

  // The next batch gathers while an earlier one waits for the event store: the sensor's report, then the hub's uplink.
  const sent = await whileAppendsWait(t, async () => {
    const calls = t.platform.translation.calls;
    const waiting = publish(c, `${ROOT}/climate`, { waiting: true });
    await new Promise((r) => setTimeout(r, 100));
    const report = publish(c, sensor, { n: 2 });
    const uplinked = publish(c, hub, { encodedData: { hexEncoded: '07', port: 1 } });
    await eventually(async () => t.platform.translation.calls === calls + 1, 5000, 'the hub’s uplink decoded as it arrived');
    return [waiting, report, uplinked];
  });
  await Promise.all(sent);
  const after = await deviceWhen(t, sub._id, (d) => d.temperature === 7, 'the hub’s update of the sensor');
  const stored = await t.platform.deps.store.readStream(`device-${sub._id}`);
  const second = stored.map((e) => (e.data as { payload?: Record<string, unknown> }).payload).find((r) => r?.n === 2);
  assert.is(second?.seenTemperature, -273, 'the report ahead of the hub’s uplink was translated without its update');
  assert.is(after.n, 2);
  await c.endAsync();
});

ingest('when the read models are rebuilt, then decoded fields come back from the events and no translator runs', async ({ t }) => {
  const device = await givenDevice(t, {
    name: 'rebuild me',
    translatorPreferences: [
      { name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' },
      { name: 'daily-temperature', version: '1.0.0', upgradePolicy: 'none' },
    ],
  });
  await uplink(t, device._id, climateHex(22, 45, 3000));
  const before = await uplink(t, device._id, climateHex(24, 47, 3000));
  const stored = await t.platform.deps.store.readStream(`device-${device._id}`);
  const reports = stored.filter((e) => e.type === 'DeviceReported').map((e) => (e.data as { payload: Record<string, unknown> }).payload);
  assert.equal(reports.map((r) => [r.temperature, r.temperatureDayCount]), [[22, 1], [24, 2]], 'the events carry the decided fields');

  const calls = t.platform.translation.calls;
  await rebuild(t.platform.deps.store, t.platform.deps.db, pino({ level: 'silent' }));
  const after = await t.call('GET', `/api/iotnodes/${device._id}`);
  assert.is(t.platform.translation.calls, calls, 'no translator call during the rebuild');
  for (const field of ['temperature', 'relativeHumidity', 'batteryVoltage', 'temperatureDayCount', 'temperatureDayMax', 'temperatureDayMean', 'reportedAt']) {
    assert.equal(after.body[field], before[field], field);
  }
});

ingest.run();
