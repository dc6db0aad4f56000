import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { TestClock } from '../support/clock.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';
import { givenUser } from '../users/given.js';
import { eventCount } from '../users/given.js';
import { givenCalculation, givenCalculator, givenDevice, grant, lastValue, readings, windowOf } from './given.js';
import { deviceNow, edge, givenRule, onDevice, ruleLog, setField, when } from '../rules/given.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import type { DeviceEvent } from '../../domain/devices/device.js';

const ROOT = 'svc/generic/v2/calc';

interface Ctx {
  t: TestPlatform;
  clock: TestClock;
  p: Provider;
  mqtt: MqttClient;
  /** Devices created by their first MQTT message on `${ROOT}/<name>`. */
  a: string;
  b: string;
  s: string;
}

const reactor = suite<Ctx>('calculations reactor');

/** Publishes a report at a time of the platform clock, and resolves once it is stored (QoS 1). */
async function report(ctx: Ctx, device: string, payload: Record<string, unknown>, at: string): Promise<void> {
  ctx.clock.set(at);
  await publish(ctx.mqtt, `${ROOT}/${device}`, payload);
}

/** The readings of a field once there are `n` of them. */
async function readingsOnce(t: TestPlatform, deviceId: string, field: string, n: number, token?: string) {
  return eventually(async () => {
    const rows = await readings(t, deviceId, field, token);
    return rows.length >= n ? rows : undefined;
  }, 10_000, `${n} readings of ${field}`);
}

reactor.before(async (ctx) => {
  ctx.clock = new TestClock();
  ctx.t = await startTestPlatform({}, { clock: ctx.clock.now });
  ctx.p = await givenProvider(ctx.t, 'calc-provider', ['a', 'b', 's'].map((n) => `${ROOT}/${n}`));
  ctx.mqtt = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  ctx.clock.set('2026-05-01T08:00:00.000Z');
  for (const n of ['a', 'b', 's']) await publish(ctx.mqtt, `${ROOT}/${n}`, { hello: n });
  ctx.a = (await deviceOf(ctx.t, `${ROOT}/a`))._id;
  ctx.b = (await deviceOf(ctx.t, `${ROOT}/b`))._id;
  ctx.s = (await deviceOf(ctx.t, `${ROOT}/s`))._id;
});
reactor.after(async (ctx) => {
  await ctx.mqtt.endAsync();
  await ctx.t.stop();
});

reactor('given a lastValue sum over two devices, when one reports, then the destination gets the sum of both latest values as a report by the calculation, at the report\'s time', async (ctx) => {
  const { t, a, b } = ctx;
  const c = await givenDevice(t, 'totals');
  await report(ctx, 'a', { power: 2 }, '2026-05-01T09:00:00.000Z');
  await report(ctx, 'b', { power: 3.5 }, '2026-05-01T09:00:10.000Z');
  const calc = await givenCalculation(t, lastValue([[a, 'power'], [b, 'power']], [c, 'totalPower'], 'sum'));
  await report(ctx, 'a', { power: 5 }, '2026-05-01T09:01:00.000Z');
  const [first] = await readingsOnce(t, c, 'totalPower', 1);
  assert.equal(first, { time: '2026-05-01T09:01:00.000Z', value: 8.5 });
  // A later report of b at an earlier time than a's last one: a's latest up to that time is still 5.
  await report(ctx, 'b', { power: 1 }, '2026-05-01T09:02:00.000Z');
  const rows = await readingsOnce(t, c, 'totalPower', 2);
  assert.equal(rows[1], { time: '2026-05-01T09:02:00.000Z', value: 6 });

  const events = await t.platform.deps.store.readStream(`device-${c}`);
  const results = events.filter((e) => e.type === 'DeviceReported');
  assert.is(results.length, 2);
  assert.equal(results[0]!.data, { id: c, topic: `calculation:${calc._id}`, path: [], payload: { totalPower: 8.5 }, reportedAt: '2026-05-01T09:01:00.000Z' });
  assert.is(results[0]!.metadata.actor, `calculation:${calc._id}`);
  const trigger = (await t.platform.deps.store.readStream(`device-${a}`)).at(-1)!;
  assert.is(results[0]!.metadata.causationId, trigger.id, 'caused by the report of a');
  assert.is(results[0]!.metadata.correlationId, trigger.metadata.correlationId);

  const device = (await t.call('GET', `/api/iotnodes/${c}`)).body;
  assert.equal([device.totalPower, device.reportedAt], [6, '2026-05-01T09:02:00.000Z']);
  await eventually(async () => (await t.call('GET', `/api/calculations/${calc._id}`)).body.lastResult?.value === 6, 5000, 'the last result');
  assert.equal((await t.call('GET', `/api/calculations/${calc._id}`)).body.lastResult, { value: 6, reportedAt: '2026-05-01T09:02:00.000Z' });
});

reactor('given a calculation, when a report not written by it names its topic (calculation:<id>, as an external broker\'s topic could), then it is not taken for the calculation\'s last result', async (ctx) => {
  const { t, a } = ctx;
  const c = await givenDevice(t, 'spoof target');
  const calc = await givenCalculation(t, lastValue([[a, 'spoofable']], [c, 'spoofed'], 'max'));
  await report(ctx, 'a', { spoofable: 4 }, '2026-05-01T10:00:00.000Z');
  await eventually(async () => (await t.call('GET', `/api/calculations/${calc._id}`)).body.lastResult?.value === 4, 5000, 'the real result');
  const forged: DeviceEvent = { type: 'DeviceReported', data: { id: c, topic: `calculation:${calc._id}`, path: [], payload: { spoofed: 999 }, reportedAt: '2026-05-01T10:05:00.000Z' } };
  const stored = await t.platform.deps.store.append(`device-${c}`, [toNewEvent(forged, { actor: 'connector:000000000000000000000000', correlationId: 'forged', now: '2026-05-01T10:05:00.000Z' })], 'any');
  await t.platform.deps.projections.waitFor(stored.position, 5000);
  assert.equal((await t.call('GET', `/api/calculations/${calc._id}`)).body.lastResult, { value: 4, reportedAt: '2026-05-01T10:00:00.000Z' });
});

reactor('given a device-triggered rule on a calculation\'s destination, when a source reports, then each result fires the rule as a report from a device would, and the rule\'s setField on the source runs no calculation', async (ctx) => {
  const { t, a } = ctx;
  const tank = await givenDevice(t, 'tank levels');
  const pump = await givenDevice(t, 'pump');
  const calc = await givenCalculation(t, lastValue([[a, 'level']], [tank, 'levelMax'], 'max', { type: 'onChange' }, 'level max'));
  const rule = await givenRule(
    t,
    'pump.stop',
    [onDevice('result', tank, ['levelMax']), when('high', tank, 'levelMax', 'gt', 10), setField('stop', pump, 'running', false), setField('reset', a, 'level', 0)],
    [edge('result', 'high'), edge('high', 'stop'), edge('high', 'reset')],
  );
  await report(ctx, 'a', { level: 4 }, '2026-05-01T09:20:00.000Z');
  await report(ctx, 'a', { level: 12 }, '2026-05-01T09:21:00.000Z');
  await readingsOnce(t, tank, 'levelMax', 2);
  await eventually(async () => ((await deviceNow(t, pump)).running === false ? true : undefined), 10_000, 'the pump stopped by the rule');
  // Only the result above 10 passed the condition: one run, set off by the calculation's report of 12.
  const runs = await eventually(async () => {
    const rows = (await ruleLog(t, rule._id)).filter((l) => l.data?.trigger);
    return rows.length ? rows : undefined;
  }, 10_000, 'the rule run logged');
  assert.is(runs.length, 1);
  assert.is(runs[0]!.data!.trigger.deviceId, tank);
  assert.equal(runs[0]!.data!.conditions[0].actual, 12);
  const result = (await t.platform.deps.store.readStream(`device-${tank}`)).filter((e) => e.type === 'DeviceReported').at(-1)!;
  assert.is(result.metadata.actor, `calculation:${calc._id}`);
  const set = (await t.platform.deps.store.readStream(`device-${pump}`)).at(-1)!;
  assert.is(set.metadata.correlationId, result.metadata.correlationId, 'the rule\'s change follows the same correlation as the report that started it');

  // The reset is an update, not a reading: the next result comes from the next report only.
  await eventually(async () => ((await deviceNow(t, a)).level === 0 ? true : undefined), 10_000, 'the source reset by the rule');
  await report(ctx, 'a', { level: 1 }, '2026-05-01T09:22:00.000Z');
  await readingsOnce(t, tank, 'levelMax', 3);
  assert.equal(await readings(t, tank, 'levelMax'), [
    { time: '2026-05-01T09:20:00.000Z', value: 4 },
    { time: '2026-05-01T09:21:00.000Z', value: 12 },
    { time: '2026-05-01T09:22:00.000Z', value: 1 },
  ]);
});

reactor('given a calculation, when a source reports other fields only, then it does not run', async (ctx) => {
  const { t, a } = ctx;
  const c = await givenDevice(t, 'quiet');
  await givenCalculation(t, lastValue([[a, 'flow']], [c, 'flowCopy'], 'max'));
  const sentinel = await givenCalculation(t, lastValue([[a, 'other']], [c, 'otherCopy'], 'max'));
  await report(ctx, 'a', { other: 1 }, '2026-05-01T09:10:00.000Z');
  await readingsOnce(t, c, 'otherCopy', 1);
  assert.equal(await readings(t, c, 'flowCopy'), [], 'no reading of flow, no run');
  assert.ok(sentinel._id);
});

reactor('given a calculation reading a nested field, when the source reports on a sub-topic, then the dotted path is its source', async (ctx) => {
  const { t, a } = ctx;
  const c = await givenDevice(t, 'nested');
  await givenCalculation(t, windowOf([a, 'probe.depth'], 3600, [c, 'depthMax'], 'max'));
  ctx.clock.set('2026-05-01T09:20:00.000Z');
  await publish(ctx.mqtt, `${ROOT}/a/probe`, { depth: 4.25 });
  assert.equal(await readingsOnce(t, c, 'depthMax', 1), [{ time: '2026-05-01T09:20:00.000Z', value: 4.25 }]);
});

reactor('given a chain of calculations, when the first source reports, then the second runs on the first\'s result', async (ctx) => {
  const { t, a, b } = ctx;
  const c = await givenDevice(t, 'chain middle');
  const d = await givenDevice(t, 'chain end');
  await givenCalculation(t, lastValue([[a, 'load'], [b, 'load']], [c, 'load'], 'max'));
  const second = await givenCalculation(t, windowOf([c, 'load'], 600, [d, 'loadSum10m'], 'sum'));
  await report(ctx, 'a', { load: 10 }, '2026-05-01T10:00:00.000Z');
  await report(ctx, 'b', { load: 30 }, '2026-05-01T10:01:00.000Z');
  await report(ctx, 'a', { load: 20 }, '2026-05-01T10:12:00.000Z');
  // c.load: 10 at 10:00, 30 at 10:01, 30 at 10:12; d sums c's readings over the 10 minutes before each.
  const rows = await readingsOnce(t, d, 'loadSum10m', 3);
  assert.equal(rows, [
    { time: '2026-05-01T10:00:00.000Z', value: 10 },
    { time: '2026-05-01T10:01:00.000Z', value: 40 },
    { time: '2026-05-01T10:12:00.000Z', value: 30 },
  ]);
  const last = (await t.platform.deps.store.readStream(`device-${d}`)).at(-1)!;
  assert.is(last.metadata.actor, `calculation:${second._id}`);
});

reactor('given a channel on the destination, when a result is written, then the output topic carries it like any change', async (ctx) => {
  const { t, a } = ctx;
  const watcher = await givenUser(t, 'calc-watcher');
  const c = await givenDevice(t, 'watched');
  const channel = await t.call('POST', '/api/channels', { body: { name: 'results', iotnode: c, mqtt: { type: 'keycloakUser', recipient: watcher.id } } });
  assert.is(channel.status, 201, channel.text);
  const calc = await givenCalculation(t, lastValue([[a, 'pressure']], [c, 'pressureCopy'], 'max'));
  const consumer = await connectMqtt(t, watcher.id, watcher.token);
  try {
    const got: any[] = [];
    consumer.on('message', (_topic, payload) => got.push(JSON.parse(payload.toString())));
    await consumer.subscribeAsync(`svc/output/v2/${watcher.id}/iotnode/${c}`, { qos: 1 });
    await report(ctx, 'a', { pressure: 101325 }, '2026-05-01T10:30:00.000Z');
    const message = await eventually(async () => got.find((m) => m.diff?.pressureCopy !== undefined), 10_000, 'the result on the output topic');
    assert.equal(message.diff, { pressureCopy: 101325, reportedAt: '2026-05-01T10:30:00.000Z', updatedAt: '2026-05-01T10:30:00.000Z' });
    assert.is(message.event.actor, `calculation:${calc._id}`);
    assert.is(message.event.type, 'DeviceReported');
  } finally {
    await consumer.endAsync();
  }
});

reactor('given a deleted calculation, when its source reports, then it writes nothing', async (ctx) => {
  const { t, a } = ctx;
  const c = await givenDevice(t, 'deleted calc');
  const calc = await givenCalculation(t, lastValue([[a, 'level']], [c, 'levelCopy'], 'max'));
  await givenCalculation(t, lastValue([[a, 'level']], [c, 'levelSentinel'], 'max'));
  assert.is((await t.call('DELETE', `/api/calculations/${calc._id}`)).status, 204);
  await report(ctx, 'a', { level: 3 }, '2026-05-01T10:40:00.000Z');
  await readingsOnce(t, c, 'levelSentinel', 1);
  assert.equal(await readings(t, c, 'levelCopy'), []);
});

reactor('given an owner who loses read access to a source, when the source reports, then the calculation halts, logs it once, and runs again once access is back', async (ctx) => {
  const { t, s } = ctx;
  const uma = await givenCalculator(t, 'uma');
  await grant(t, 'device', s, uma.id, ['read']);
  const own = await givenDevice(t, 'uma results', uma.token);
  const calc = await givenCalculation(t, windowOf([s, 'humidity'], 3600, [own, 'humidityMax'], 'max'), uma.token);
  await report(ctx, 's', { humidity: 40 }, '2026-05-01T11:00:00.000Z');
  await readingsOnce(t, own, 'humidityMax', 1, uma.token);

  const revoke = await t.call('DELETE', '/api/access-rights', { body: { resourceType: 'device', resourceId: s, subjectType: 'user', subjectId: uma.id } });
  assert.ok(revoke.status < 300, revoke.text);
  await report(ctx, 's', { humidity: 55 }, '2026-05-01T11:01:00.000Z');
  const halted = await eventually(async () => {
    const body = (await t.call('GET', `/api/calculations/${calc._id}`, { token: uma.token })).body;
    return body.status === 'halted' ? body : undefined;
  }, 10_000, 'the calculation to halt');
  assert.is(halted.haltedReason, `its owner cannot read the source iotnode ${s}`);
  await report(ctx, 's', { humidity: 60 }, '2026-05-01T11:02:00.000Z');
  const logsOf = async () => (await t.call('GET', `/api/logs?resourceId=${calc._id}`, { token: uma.token })).body.logs as any[];
  const logs = await eventually(async () => ((await logsOf()).length ? logsOf() : undefined), 5000, 'the log entry');
  assert.is(logs.length, 1);
  assert.equal(
    { resourceType: logs[0].resourceType, type: logs[0].type, category: logs[0].category, message: logs[0].message },
    { resourceType: 'calculation', type: 'error', category: 'access', message: `The calculation stopped: its owner cannot read the source iotnode ${s}. It runs again once that is no longer so.` },
  );

  await grant(t, 'device', s, uma.id, ['read']);
  await report(ctx, 's', { humidity: 50 }, '2026-05-01T11:03:00.000Z');
  const rows = await readingsOnce(t, own, 'humidityMax', 2, uma.token);
  assert.equal(rows, [
    { time: '2026-05-01T11:00:00.000Z', value: 40 },
    { time: '2026-05-01T11:03:00.000Z', value: 60 },
  ], 'nothing was written while halted; the window still holds what was reported meanwhile');
  await eventually(async () => (await t.call('GET', `/api/calculations/${calc._id}`, { token: uma.token })).body.status === 'running', 5000, 'running again');
  const after = await eventually(async () => ((await logsOf()).length === 2 ? logsOf() : undefined), 5000, 'the second log entry');
  assert.equal([after[0].type, after[0].message], ['info', 'The calculation runs again: its owner has the rights it needs.']);
  const events = (await t.platform.deps.store.readStream(`calculation-${calc._id}`)).map((e) => e.type);
  assert.equal(events, ['CalculationCreated', 'CalculationHalted', 'CalculationResumed']);
});

reactor('given an interval calculation, when the clock passes a boundary, then it runs once for that boundary, also across a restart', async (ctx) => {
  const { t, a } = ctx;
  const c = await givenDevice(t, 'every minute');
  await report(ctx, 'a', { speed: 7 }, '2026-05-01T12:00:10.000Z');
  ctx.clock.set('2026-05-01T12:00:30.000Z');
  const calc = await givenCalculation(t, lastValue([[a, 'speed']], [c, 'speedEveryMinute'], 'max', { type: 'interval', seconds: 60 }));
  await report(ctx, 'a', { speed: 9 }, '2026-05-01T12:00:59.000Z');
  await report(ctx, 'a', { speed: 11 }, '2026-05-01T12:01:00.400Z');
  // The boundary 12:01:00 takes the latest reading at or before it.
  assert.equal(await readingsOnce(t, c, 'speedEveryMinute', 1), [{ time: '2026-05-01T12:01:00.000Z', value: 9 }]);
  await new Promise((r) => setTimeout(r, 1500));
  assert.is((await readings(t, c, 'speedEveryMinute')).length, 1, 'one result per boundary');

  const before = await eventCount(t);
  const url = t.platform.deps.config.databaseUrl!;
  await ctx.mqtt.endAsync();
  await t.stop();
  ctx.t = await startTestPlatform({ databaseUrl: url }, { clock: ctx.clock.now });
  ctx.mqtt = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  await new Promise((r) => setTimeout(r, 1500));
  assert.is(await eventCount(ctx.t), before, 'after the restart, the boundary already run is not stored again');

  ctx.clock.set('2026-05-01T12:02:00.100Z');
  const rows = await readingsOnce(ctx.t, c, 'speedEveryMinute', 2);
  assert.equal(rows[1], { time: '2026-05-01T12:02:00.000Z', value: 11 });
  const results = (await ctx.t.platform.deps.store.readStream(`device-${c}`)).filter((e) => e.type === 'DeviceReported');
  assert.equal(results.map((e) => [e.metadata.actor, e.metadata.correlationId]), [
    [`calculation:${calc._id}`, `calculation:${calc._id}:2026-05-01T12:01:00.000Z`],
    [`calculation:${calc._id}`, `calculation:${calc._id}:2026-05-01T12:02:00.000Z`],
  ]);
});

reactor.run();
