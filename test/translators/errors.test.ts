import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { RawPublisher } from '../support/rawMqtt.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';
import { givenUser } from '../users/given.js';
import { climateHex, deviceWhen, givenDevice, givenTranslator, logsAtLeast, logsOf, settle, uplink, type LogLine } from './given.js';

/**
 * One hardware decoder that decodes port 1 normally and misbehaves on the
 * port a test picks: each violation of the contract, and each attempt to
 * leave the sandbox. Every misbehaving uplink must leave a log entry on the
 * device, the platform serving, and the next uplink decoded normally.
 */
const hostile = `
function recurse(n) { return recurse(n + 1) + 1; }

const ports = {
  // contract violations
  10: () => ({ result: { humidity: 50 } }),
  11: () => ({ result: { temperature: 'warm' } }),
  12: () => ({ result: { temperature: null } }),
  13: () => ({ result: { temperature: Infinity } }),
  14: () => 42,
  15: () => ({ result: [21] }),
  16: () => { throw new Error('frame too short'); },
  17: () => ({ result: { temperature: 1 }, additionalDeviceUpdates: 'sensor-1' }),
  18: () => ({ result: { temperature: 1 }, extra: true }),
  19: () => ({ result: { measuredAt: '2024-13-45' } }),
  20: () => ({ result: { details: JSON.parse('{"__proto__": {"polluted": true}}') } }),
  21: () => ({ result: JSON.parse('{"__proto__": {"polluted": true}}') }),
  22: () => null,
  // escapes
  30: () => { while (true) {} },
  31: () => { const chunks = []; for (;;) chunks.push('x'.repeat(1024 * 1024) + chunks.length); },
  32: () => recurse(0),
  33: () => ({ result: { note: require('fs').readFileSync('/etc/passwd', 'utf8') } }),
  34: () => ({ result: { note: String(process.pid) } }),
  35: () => ({ result: { note: String(globalThis.process.env.HOME) } }),
  36: () => ({ result: { note: String(this.constructor.constructor('return process')().pid) } }),
  37: () => ({ result: { note: String(Function('return this')().require('child_process')) } }),
  38: () => { Object.prototype.polluted = true; return { result: { details: {} } }; },
};

function translate({ encodedData }) {
  const attack = ports[encodedData.port];
  if (attack) return attack();
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
  const out = { temperature: bytes.readInt16BE(0) / 100 };
  // undefined and NaN are dropped, never a violation
  out.note = undefined;
  out.measuredAt = NaN;
  if (({}).polluted !== undefined) out.note = 'prototype polluted across calls';
  return { result: out };
}
`;

const spec = {
  temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  measuredAt: 'date',
  details: 'object',
  note: 'string',
};

const errors = suite<{ t: TestPlatform; p: Provider; device: string; count: number; next: number }>('Translator errors and sandbox escapes through ingest');

/** A device created by a first message on `topic`, then given the hostile decoder; the connection stays open. */
async function givenHostileMqttDevice({ t, p }: { t: TestPlatform; p: Provider }, topic: string) {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { hello: 1 });
  const mqttDevice = await deviceOf(t, topic);
  const put = await t.call('PUT', `/api/iotnodes/${mqttDevice._id}`, { body: { translatorPreferences: [{ name: 'hostile-decoder', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(put.status, 200, put.text);
  return { c, mqttDevice };
}

errors.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'hostile', ['svc/generic/v2/hostile/one', 'svc/generic/v2/hostile/spec', 'svc/generic/v2/hostile/burst']);
  await givenTranslator(ctx.t, { name: 'hostile-decoder', version: '1.0.0', match: {}, spec, code: hostile });
  ctx.device = (await givenDevice(ctx.t, { name: 'hostile', translatorPreferences: [{ name: 'hostile-decoder', version: '1.0.0', upgradePolicy: 'none' }] }))._id;
  ctx.count = 0;
  ctx.next = 10;
});
errors.after(async (ctx) => {
  await ctx.t.stop();
});

/**
 * Sends the misbehaving uplink, then checks the new log entry (debug,
 * system, translator name and version, kept 6 hours), that the raw uplink
 * was still stored undecoded, that the platform serves, and that the next
 * normal uplink decodes.
 */
async function misbehaves(ctx: { t: TestPlatform; device: string; count: number; next: number }, port: number, message: RegExp): Promise<LogLine> {
  const { t, device } = ctx;
  const before = await t.call('GET', `/api/iotnodes/${device}`);
  const after = await uplink(t, device, 'abcd', port);
  assert.equal(after.encodedData, { hexEncoded: 'abcd', port }, 'the raw uplink is stored');
  assert.is(after.temperature, before.body.temperature, 'nothing of a rejected translation is applied');
  assert.is(after.note, undefined);
  ctx.count++;
  const logs = await logsAtLeast(t, device, ctx.count);
  const entry = logs[0]!;
  assert.is(entry.type, 'debug');
  assert.is(entry.category, 'system');
  assert.match(entry.message, /^Translator hostile-decoder 1\.0\.0 failed/);
  assert.match(entry.message, message);
  assert.is(entry.data?.translator, 'hostile-decoder');
  assert.is(entry.data?.version, '1.0.0');
  const kept = Date.parse(entry.expiresAt!) - Date.parse(entry.time);
  assert.ok(Math.abs(kept - 6 * 3600 * 1000) < 5000, `kept 6 hours, not ${kept} ms`);

  assert.is((await t.call('GET', '/api/health', { token: null })).status, 200, 'the platform keeps serving');
  const temperature = ctx.next++;
  const normal = await uplink(t, device, climateHex(temperature, 0, 0), 1);
  assert.is(normal.temperature, temperature, 'the next uplink decodes normally');
  assert.is(normal.note, undefined, 'the next call runs in a clean context');
  await settle(t);
  assert.is((await logsOf(t, device)).length, ctx.count, 'a successful translation writes no log');
  assert.is(({} as Record<string, unknown>).polluted, undefined, 'the host prototype is untouched');
  return entry;
}

errors('when a decoder emits a key not in its spec, then the translation is rejected and logged naming the key', async (ctx) => {
  await misbehaves(ctx, 10, /\(spec\): humidity: not declared in the translator's spec/);
});

errors('when a decoder emits a value of the wrong type, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 11, /\(spec\): temperature: expected number, got string "warm"/);
});

errors('when a decoder emits null, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 12, /\(spec\): temperature: null is not a valid number/);
});

errors('when a decoder emits Infinity, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 13, /\(spec\): .*temperature.*not a finite number/);
});

errors('when a decoder returns a non-object, null, or a non-object result, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 14, /\(result\): translate must return an object/);
  await misbehaves(ctx, 22, /\(result\): translate must return an object/);
  await misbehaves(ctx, 15, /\(result\): result must be an object of fields/);
});

errors('when a decoder throws, then the message is logged with its line and column, once', async (ctx) => {
  const entry = await misbehaves(ctx, 16, /\(runtime\): .*frame too short/);
  assert.is(entry.message, 'Translator hostile-decoder 1.0.0 failed (runtime): Error: frame too short (line 12, column 30)');
});

errors('when additionalDeviceUpdates is not a list, or the return value has an unknown key, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 17, /\(result\): additionalDeviceUpdates must be a list/);
  await misbehaves(ctx, 18, /\(result\): unexpected key 'extra'/);
});

errors('when a date field is not an ISO 8601 date, then it is rejected and logged', async (ctx) => {
  await misbehaves(ctx, 19, /\(spec\): measuredAt: expected an ISO 8601 date/);
});

errors('when a result carries __proto__ at any depth, then it is rejected and the host prototype stays clean', async (ctx) => {
  await misbehaves(ctx, 20, /\(spec\): details: contains the key '__proto__'/);
  await misbehaves(ctx, 21, /\(spec\): __proto__/);
});

/** A device of its own on the hostile decoder, for a failure that costs the sandbox its context: three of those on one device suspend the decoder there. */
async function ownDevice(ctx: { t: TestPlatform; device: string; count: number; next: number }, name: string) {
  const device = (await givenDevice(ctx.t, { name, translatorPreferences: [{ name: 'hostile-decoder', version: '1.0.0', upgradePolicy: 'none' }] }))._id;
  return { ...ctx, device, count: 0 };
}

errors('when a decoder loops forever, then it is stopped after its deadline and logged as a time-out', async (ctx) => {
  await misbehaves(await ownDevice(ctx, 'looping once'), 30, /\(timeout\)/);
});

errors('when a decoder allocates without bound, then it is stopped at the memory cap and logged', async (ctx) => {
  await misbehaves(await ownDevice(ctx, 'heap bomb once'), 31, /\(memory\)/);
});

errors('when a decoder recurses without end, then it is stopped and logged', async (ctx) => {
  await misbehaves(await ownDevice(ctx, 'recursing once'), 32, /\((memory|runtime)\)/);
});

errors('when a decoder reaches for require, process, or the host through globalThis and Function constructors, then it finds nothing and is logged', async (ctx) => {
  await misbehaves(ctx, 33, /\(runtime\): .*require/);
  await misbehaves(ctx, 34, /\(runtime\): .*process/);
  await misbehaves(ctx, 35, /\(runtime\)/);
  await misbehaves(ctx, 36, /\(runtime\)/);
  await misbehaves(ctx, 37, /\(runtime\)/);
});

errors('when a decoder pollutes Object.prototype inside its own sandbox context, then the host never sees it and decoding goes on', async (ctx) => {
  const { t, device } = ctx;
  const after = await uplink(t, device, 'abcd', 38);
  assert.equal(after.details, {});
  assert.is(({} as Record<string, unknown>).polluted, undefined);
  const next = await uplink(t, device, climateHex(5, 0, 0), 1);
  assert.is(next.temperature, 5);
});

errors('when an escape arrives over MQTT, then the broker keeps serving and the next message decodes', async (ctx) => {
  const { t } = ctx;
  const topic = 'svc/generic/v2/hostile/one';
  const { c, mqttDevice } = await givenHostileMqttDevice(ctx, topic);
  await publish(c, topic, { encodedData: { hexEncoded: '00', port: 30 } });
  await publish(c, topic, { encodedData: { hexEncoded: climateHex(12.5, 0, 0), port: 1 } });
  const decoded = await deviceWhen(t, mqttDevice._id, (d) => d.temperature === 12.5, 'the message after the time-out');
  assert.is(decoded.encodedData.port, 1);
  const logs = await logsAtLeast(t, mqttDevice._id, 1);
  assert.match(logs[0]!.message, /^Translator hostile-decoder 1\.0\.0 failed \(timeout\)/);
  await c.endAsync();
});

errors('when a decoder reached over MQTT violates its spec, then the raw uplink is stored undecoded and the device gets the same log entry as over HTTP', async (ctx) => {
  const { t } = ctx;
  const topic = 'svc/generic/v2/hostile/spec';
  const { c, mqttDevice } = await givenHostileMqttDevice(ctx, topic);
  await publish(c, topic, { encodedData: { hexEncoded: 'abcd', port: 10 }, rssi: -80 });
  const logs = await logsAtLeast(t, mqttDevice._id, 1);
  const entry = logs[0]!;
  assert.is(entry.message, "Translator hostile-decoder 1.0.0 failed (spec): humidity: not declared in the translator's spec");
  assert.is(entry.type, 'debug');
  assert.is(entry.category, 'system');
  assert.is(entry.priority, 'medium');
  assert.equal({ translator: entry.data?.translator, version: entry.data?.version, kind: entry.data?.kind, key: entry.data?.key }, { translator: 'hostile-decoder', version: '1.0.0', kind: 'spec', key: 'humidity' });
  const kept = Date.parse(entry.expiresAt!) - Date.parse(entry.time);
  assert.ok(Math.abs(kept - 6 * 3600 * 1000) < 5000, `kept 6 hours, not ${kept} ms`);
  const stored = await deviceWhen(t, mqttDevice._id, (d) => d.rssi === -80, 'the report reaches the read model');
  assert.equal(stored.encodedData, { hexEncoded: 'abcd', port: 10 }, 'the raw uplink is stored');
  assert.is(stored.humidity, undefined, 'nothing of the rejected translation is applied');

  await publish(c, topic, { encodedData: { hexEncoded: climateHex(9.5, 0, 0), port: 1 } });
  const decoded = await deviceWhen(t, mqttDevice._id, (d) => d.temperature === 9.5, 'the next MQTT uplink decoded');
  assert.is(decoded.encodedData.port, 1);
  await settle(t);
  assert.is((await logsOf(t, mqttDevice._id)).length, 1, 'the successful translation writes no log');
  await c.endAsync();
});

errors('when encodedData is not a hex string with a port, then HTTP answers 422 and MQTT stores it undecoded with a log entry', async (ctx) => {
  const { t, device, p } = ctx;
  const bad = await t.call('POST', `/api/iotnodes/${device}/uplinks`, { body: { encodedData: { hexEncoded: 'xyz', port: 1 } } });
  assert.is(bad.status, 422);
  assert.match(bad.text, /^ERR - encodedData\.hexEncoded /);
  const topic = 'svc/generic/v2/hostile/one';
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, topic, { encodedData: { hexEncoded: 'xyz', port: 1 } });
  const mqttDevice = await deviceOf(t, topic);
  const logs = await eventually(async () => {
    const all = await logsOf(t, mqttDevice._id);
    return all.some((l) => l.message.includes('encodedData must be')) ? all : undefined;
  }, 5000, 'the encodedData log entry');
  assert.ok(logs.length >= 1);
  await c.endAsync();
});

errors('when a decoder times out three times within a minute, then it is suspended and its uplinks are stored undecoded at once, while other decoders keep running', async (ctx) => {
  const { t, device } = ctx;
  await givenTranslator(t, { name: 'always-loops', match: {}, spec, code: 'function translate() { while (true) {} }' });
  const looping = (await givenDevice(t, { name: 'looping', translatorPreferences: [{ name: 'always-loops', version: '1.0.0', upgradePolicy: 'none' }] }))._id;
  for (let i = 0; i < 3; i++) await uplink(t, looping, 'abcd', 1);
  const logs = await logsAtLeast(t, looping, 3);
  assert.ok(logs.every((l) => /failed \(timeout\)/.test(l.message)));
  const calls = t.platform.translation.calls;
  const stored = await uplink(t, looping, 'beef', 1);
  assert.equal(stored.encodedData, { hexEncoded: 'beef', port: 1 });
  assert.is(t.platform.translation.calls, calls, 'a suspended decoder is not run');
  const suspended = await logsAtLeast(t, looping, 4);
  assert.match(suspended[0]!.message, /^Translator always-loops 1\.0\.0 failed \(suspended\): suspended for this device until /);
  assert.is((await uplink(t, device, climateHex(7, 0, 0), 1)).temperature, 7, 'another translator is unaffected');
});

errors('when a burst of uplinks that make a decoder loop arrives in one read, then the decoder runs at most three times before it is suspended, and the rest are stored undecoded', async (ctx) => {
  const { t } = ctx;
  const topic = 'svc/generic/v2/hostile/burst';
  const { c, mqttDevice } = await givenHostileMqttDevice(ctx, topic);
  await c.endAsync();
  const raw = new RawPublisher(t.mqttPort);
  await raw.connect(ctx.p.username, ctx.p.password);
  try {
    const calls = t.platform.translation.calls;
    // Port 30 makes the hostile decoder loop until its time limit; all eight publishes come in one TCP write.
    raw.publishAll(Array.from({ length: 8 }, (_, i) => ({ messageId: i + 1, topic, payload: JSON.stringify({ encodedData: { hexEncoded: '00', port: 30 }, n: i }) })));
    await eventually(async () => raw.acks >= 8, 30_000, 'every uplink acknowledged');
    assert.ok(t.platform.translation.calls - calls <= 3, `the looping decoder ran ${t.platform.translation.calls - calls} times`);
    const logs = await logsAtLeast(t, mqttDevice._id, 8);
    assert.ok(logs.filter((l) => /failed \(suspended\)/.test(l.message)).length >= 5, logs.map((l) => l.message).join('\n'));
    assert.is((await deviceWhen(t, mqttDevice._id, (d) => d.n === 7, 'the last uplink stored')).n, 7);
  } finally {
    raw.close();
  }
});

errors('when one device’s payloads make a shared decoder loop three times within a minute, then only that device is suspended: another device on the same decoder decodes normally', async (ctx) => {
  const { t } = ctx;
  // An owner of its own: the admin's devices have made this decoder fail in the tests before (sandbox/budget.ts).
  const { token } = await givenUser(t, 'shared-loop-owner', { attributes: { roles: ['installer'] } });
  const preferences = [{ name: 'hostile-decoder', version: '1.0.0', upgradePolicy: 'none' }];
  const a = (await givenDevice(t, { name: 'looping payloads', translatorPreferences: preferences }, token))._id;
  const b = (await givenDevice(t, { name: 'neighbour', translatorPreferences: preferences }, token))._id;
  for (let i = 0; i < 3; i++) await uplink(t, a, 'abcd', 30, {}, token);
  assert.ok((await logsAtLeast(t, a, 3, token)).every((l) => /failed \(timeout\)/.test(l.message)));

  const calls = t.platform.translation.calls;
  const started = Date.now();
  const neighbour = await uplink(t, b, climateHex(17.5, 0, 0), 1, {}, token);
  assert.is(neighbour.temperature, 17.5, 'the next uplink of another device decodes normally');
  assert.is(t.platform.translation.calls, calls + 1);
  assert.ok(Date.now() - started < 1000, 'without waiting for a deadline');
  await settle(t);
  assert.equal(await logsOf(t, b, token), [], 'the other device has no log entry');

  // The suspended device stays suspended for the window, even for a payload that would decode.
  const own = await uplink(t, a, climateHex(18.5, 0, 0), 1, {}, token);
  assert.is(own.temperature, undefined, 'the suspended device’s uplink is stored undecoded');
  assert.equal(own.encodedData, { hexEncoded: climateHex(18.5, 0, 0), port: 1 });
  assert.is(t.platform.translation.calls, calls + 1, 'the decoder is not run for the suspended device');
  const logs = await logsAtLeast(t, a, 4, token);
  assert.match(logs[0]!.message, /^Translator hostile-decoder 1\.0\.0 failed \(suspended\): suspended for this device until \S+ after 3 time-outs, or other failures that cost a new sandbox context, on its uplinks within 60 s; the uplink is stored undecoded$/);
  assert.is((await uplink(t, b, climateHex(19.5, 0, 0), 1, {}, token)).temperature, 19.5);
});

errors('when one device’s payloads make a shared decoder run out of memory three times within a minute, then only that device is suspended', async (ctx) => {
  const { t } = ctx;
  const { token } = await givenUser(t, 'heap-owner', { attributes: { roles: ['installer'] } });
  const preferences = [{ name: 'hostile-decoder', version: '1.0.0', upgradePolicy: 'none' }];
  const a = (await givenDevice(t, { name: 'heap-filling payloads', translatorPreferences: preferences }, token))._id;
  const b = (await givenDevice(t, { name: 'heap neighbour', translatorPreferences: preferences }, token))._id;
  for (let i = 0; i < 3; i++) await uplink(t, a, 'abcd', 31, {}, token);
  assert.ok((await logsAtLeast(t, a, 3, token)).every((l) => /failed \(memory\)/.test(l.message)));
  const calls = t.platform.translation.calls;
  const own = await uplink(t, a, climateHex(18.5, 0, 0), 1, {}, token);
  assert.is(own.temperature, undefined, 'the suspended device’s uplink is stored undecoded');
  assert.is(t.platform.translation.calls, calls, 'the decoder is not run for the suspended device');
  assert.match((await logsAtLeast(t, a, 4, token))[0]!.message, /failed \(suspended\): suspended for this device until /);
  assert.is((await uplink(t, b, climateHex(19.5, 0, 0), 1, {}, token)).temperature, 19.5, 'another device on the same decoder decodes');
});

errors('when a decoder leaves promise jobs pending on every uplink, then its results are stored, and after three within a minute the device is suspended', async (ctx) => {
  const { t } = ctx;
  await givenTranslator(t, { name: 'leaves-jobs', match: {}, spec, code: 'function translate() { Promise.resolve().then(function () {}); return { result: { temperature: 5 } }; }' });
  const device = (await givenDevice(t, { name: 'pending jobs', translatorPreferences: [{ name: 'leaves-jobs', version: '1.0.0', upgradePolicy: 'none' }] }))._id;
  for (let i = 0; i < 3; i++) assert.is((await uplink(t, device, 'abcd', 1)).temperature, 5, 'the result of a call that left jobs stands');
  const calls = t.platform.translation.calls;
  const fourth = await uplink(t, device, 'beef', 1);
  assert.equal(fourth.encodedData, { hexEncoded: 'beef', port: 1 });
  assert.is(t.platform.translation.calls, calls, 'the decoder is not run for the suspended device');
  assert.match((await logsAtLeast(t, device, 1))[0]!.message, /^Translator leaves-jobs 1\.0\.0 failed \(suspended\)/);
});

errors.run();
