/**
 * The windows the calculations reactor keeps in memory give what the
 * database gives. Over real MQTT and PostgreSQL, every result of an
 * `onChange` window calculation, for each aggregation, is compared with the
 * database's own aggregate of `device_history` over the same window
 * (`windowStats`, the statement the reactor used for every run before it
 * kept windows), taken when nothing else has been stored since the run:
 * numbers, booleans and strings, equal times, late reports, a burst the
 * reactor takes in batches, a restart of the platform, and series the
 * memory leaves to the database (more readings than it may hold, a report
 * older than what it holds). `/metrics` tells which runs memory answered.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { TestClock } from '../support/clock.js';
import { scrape } from '../support/metrics.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';
import { givenCalculation, givenDevice, random, windowOf } from './given.js';
import { windowStats } from '../../reactors/calculations/readings.js';
import { windowResult } from '../../domain/calculations/aggregate.js';
import type { WindowAggregation } from '../../domain/calculations/calculation.js';
import { comparePositions, type RecordedEvent } from '../../domain/shared/events.js';
import { loadCheckpoint } from '../../domain/eventstore/subscriber.js';
import { CALCULATIONS_CHECKPOINT } from '../../reactors/calculations/reactor.js';

const TOKEN = 'memory-test-metrics-token-0123456789';
const ROOT = 'svc/generic/v2/memory';
const AGGREGATIONS: WindowAggregation[] = ['sum', 'mean', 'min', 'max', 'count', 'first', 'last', 'difference'];
const WINDOW = 600;
const T0 = Date.parse('2026-08-01T00:00:00.000Z');

interface Ctx {
  t: TestPlatform;
  clock: TestClock;
  p: Provider;
  mqtt: MqttClient;
}

interface Calc {
  id: string;
  aggregation: WindowAggregation;
  seconds: number;
  destination: string;
  field: string;
}

/** Quarters between -50 and 50: every sum of them is exact, so the order the database adds them in cannot change a bit. */
const quarter = (next: () => number) => Math.round(next() * 400 - 200) / 4;

/** Waits until the calculations reactor has handled `event` (its checkpoint has passed it), and so stored its results. */
async function handled(t: TestPlatform, event: RecordedEvent): Promise<void> {
  await eventually(async () => {
    const at = await loadCheckpoint(t.platform.deps.db, CALCULATIONS_CHECKPOINT);
    return at !== null && comparePositions(at, event.position) >= 0;
  }, 20_000, 'the calculations reactor to handle the report');
}

async function runs(t: TestPlatform): Promise<{ memory: number; database: number }> {
  const m = await scrape(t.baseUrl, TOKEN);
  return { memory: m.value('platform_calculation_window_runs_total', { source: 'memory' }) ?? 0, database: m.value('platform_calculation_window_runs_total', { source: 'database' }) ?? 0 };
}

/** One window calculation per aggregation over `source`'s `field`, each into a field of its own on a new device. */
async function givenWindows(t: TestPlatform, source: string, field: string, seconds = WINDOW, aggregations = AGGREGATIONS): Promise<Calc[]> {
  const destination = await givenDevice(t, `${field} windows ${Math.random().toString(36).slice(2, 8)}`);
  const calcs: Calc[] = [];
  for (const aggregation of aggregations) {
    const out = `${aggregation}Of${field.replaceAll('.', '_')}`;
    const calc = await givenCalculation(t, windowOf([source, field], seconds, [destination, out], aggregation, { type: 'onChange' }, `${field} ${aggregation}`));
    calcs.push({ id: calc._id, aggregation, seconds, destination, field: out });
  }
  return calcs;
}

/** The reports of a device (not the calculations' results), oldest first. */
async function reportsOf(t: TestPlatform, deviceId: string): Promise<RecordedEvent[]> {
  return (await t.platform.deps.store.readStream(`device-${deviceId}`)).filter((e) => e.type === 'DeviceReported' && !e.metadata.actor.startsWith('calculation:'));
}

/** What each calculation stored for the report `trigger`: its value, or null for nothing stored. */
async function resultsFor(t: TestPlatform, calcs: Calc[], trigger: RecordedEvent): Promise<unknown[]> {
  const streams = new Map<string, RecordedEvent[]>();
  for (const c of new Set(calcs.map((c) => c.destination))) streams.set(c, await t.platform.deps.store.readStream(`device-${c}`));
  return calcs.map((c) => {
    const found = streams.get(c.destination)!.filter((e) => e.metadata.causationId === trigger.id && e.metadata.actor === `calculation:${c.id}`);
    assert.ok(found.length <= 1, 'one result per report and calculation');
    return found[0] ? (found[0].data as { payload: Record<string, unknown> }).payload[c.field] : null;
  });
}

/** What the database's aggregate over `device_history` gives now for each calculation's window ending at `at`. */
async function databaseResults(t: TestPlatform, source: string, field: string, calcs: Calc[], at: string): Promise<unknown[]> {
  const stats = await windowStats(t.platform.deps.db, calcs.map((c) => ({ deviceId: source, field, end: at, seconds: c.seconds })));
  return calcs.map((c, i) => windowResult(c.aggregation, stats[i]!));
}

/** Publishes one report at a time of the platform clock; resolves once it is stored. */
async function report(ctx: Ctx, topic: string, payload: Record<string, unknown>, at: number): Promise<void> {
  ctx.clock.set(at);
  await publish(ctx.mqtt, topic, payload);
}

/**
 * Publishes each report and, once the reactor has handled it, compares what
 * every calculation stored for it with the database's aggregate at that
 * moment (nothing else was stored meanwhile, so it is what the run saw).
 */
async function checkEach(ctx: Ctx, topic: string, source: string, field: string, calcs: Calc[], reports: { at: number; value: unknown; payload?: Record<string, unknown> }[]): Promise<unknown[][]> {
  const all: unknown[][] = [];
  for (const [k, r] of reports.entries()) {
    await report(ctx, topic, r.payload ?? { [field]: r.value }, r.at);
    const trigger = (await reportsOf(ctx.t, source)).at(-1)!;
    await handled(ctx.t, trigger);
    assert.is((trigger.data as { reportedAt: string }).reportedAt, new Date(r.at).toISOString());
    const got = await resultsFor(ctx.t, calcs, trigger);
    const want = await databaseResults(ctx.t, source, field, calcs, new Date(r.at).toISOString());
    assert.equal(got, want, `report ${k} (${JSON.stringify(r.payload ?? r.value)} at ${new Date(r.at).toISOString()}): ${calcs.map((c) => c.aggregation).join(', ')}`);
    all.push(got);
  }
  return all;
}

const memory = suite<Ctx>('windows in memory');

memory.before(async (ctx) => {
  ctx.clock = new TestClock();
  ctx.clock.set(T0);
  ctx.t = await startTestPlatform({ metricsToken: TOKEN }, { clock: ctx.clock.now });
  ctx.p = await givenProvider(ctx.t, 'memory-provider', ['a', 'b', 'c', 'd'].map((n) => `${ROOT}/${n}`));
  ctx.mqtt = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
});
memory.after(async (ctx) => {
  await ctx.mqtt.endAsync();
  await ctx.t.stop();
});

memory('given every aggregation over a field of numbers, booleans and strings, with equal times and late reports, then each result is the database\'s, and memory answered the runs', async (ctx) => {
  const topic = `${ROOT}/a`;
  const next = random(5);
  // Readings from before the calculations exist are in their windows too.
  for (let i = 0; i < 12; i++) await report(ctx, topic, { level: quarter(next) }, T0 + i * 30_000);
  const source = (await deviceOf(ctx.t, topic))._id as string;
  const calcs = await givenWindows(ctx.t, source, 'level');
  const before = await runs(ctx.t);

  let at = T0 + 12 * 30_000;
  const reports: { at: number; value: unknown }[] = [];
  for (let i = 0; i < 70; i++) {
    at += 5_000 + Math.floor(next() * 40) * 1000;
    reports.push({ at, value: i % 11 === 3 ? next() < 0.5 : i % 13 === 5 ? `s${i}` : quarter(next) });
    // At the same time as the reading before: a string after a number, and a number after a string.
    if (i % 17 === 7) reports.push({ at, value: i % 2 ? `tie${i}` : quarter(next) });
    // A late report, 30 s before the latest: within what memory holds (the slack past the window).
    if (i % 10 === 9) reports.push({ at: at - 30_000, value: quarter(next) });
  }
  await checkEach(ctx, topic, source, 'level', calcs, reports);
  const after = await runs(ctx.t);
  assert.is(after.memory - before.memory + after.database - before.database, reports.length * calcs.length, 'every run counted once');
  assert.ok(after.memory - before.memory >= (reports.length - 1) * calcs.length, `memory answered the runs after the seed: ${JSON.stringify({ before, after })}`);
});

memory('given readings that only the database can order (two strings, and true beside 1, at one time), then first and last are the database\'s and the other aggregations stay in memory', async (ctx) => {
  const topic = `${ROOT}/b`;
  await report(ctx, topic, { mode: 'warm' }, T0);
  const source = (await deviceOf(ctx.t, topic))._id as string;
  const calcs = await givenWindows(ctx.t, source, 'mode', 60);
  const base = T0 + 3_600_000;
  await checkEach(ctx, topic, source, 'mode', calcs, [
    { at: base, value: 'b' },
    { at: base + 1000, value: 'zeta' },
    { at: base + 1000, value: 'Alpha' },
    { at: base + 2000, value: 1 },
    { at: base + 2000, value: true },
    { at: base + 2000, value: 0.5 },
    { at: base + 3000, value: 'x' },
  ]);
  await checkEach(ctx, topic, source, 'mode', calcs, [{ at: base + 60_999, value: 'p' }]);
  const before = await runs(ctx.t);
  // A window that starts on the tied strings and ends on two more: only first and last are left to the database.
  await checkEach(ctx, topic, source, 'mode', calcs, [{ at: base + 60_999, value: 'q' }]);
  const after = await runs(ctx.t);
  assert.equal({ memory: after.memory - before.memory, database: after.database - before.database }, { memory: 6, database: 2 });
});

memory('given a burst the reactor takes in batches, several reports of one series in each, then every result is the database\'s', async (ctx) => {
  const topic = `${ROOT}/c`;
  const next = random(11);
  await report(ctx, topic, { flow: 1 }, T0);
  const source = (await deviceOf(ctx.t, topic))._id as string;
  const calcs = await givenWindows(ctx.t, source, 'flow', 120);
  const before = await runs(ctx.t);
  // Strictly later times, each stored before the next is sent: the database now holds what each run held, and no more before its time.
  const sent: number[] = [];
  for (let i = 0; i < 300; i++) {
    const at = T0 + 600_000 + i * 1500 + Math.floor(next() * 1000);
    sent.push(at);
    await report(ctx, topic, { flow: quarter(next) }, at);
  }
  const triggers = (await reportsOf(ctx.t, source)).slice(-sent.length);
  await handled(ctx.t, triggers.at(-1)!);
  for (const [i, trigger] of triggers.entries()) {
    const at = (trigger.data as { reportedAt: string }).reportedAt;
    assert.is(at, new Date(sent[i]!).toISOString());
    assert.equal(await resultsFor(ctx.t, calcs, trigger), await databaseResults(ctx.t, source, 'flow', calcs, at), `report ${i} at ${at}`);
  }
  const after = await runs(ctx.t);
  assert.equal({ memory: after.memory - before.memory, database: after.database - before.database }, { memory: sent.length * calcs.length, database: 0 });
});

memory('given reports that bring one field twice (a dotted key beside the same path nested), then memory holds both readings, as history does', async (ctx) => {
  const topic = `${ROOT}/d`;
  await report(ctx, topic, { hello: 'd' }, T0);
  const source = (await deviceOf(ctx.t, topic))._id as string;
  const calcs = await givenWindows(ctx.t, source, 'probe.depth', WINDOW, ['count', 'sum', 'min', 'max']);
  const next = random(31);
  const got = await checkEach(ctx, topic, source, 'probe.depth', calcs, Array.from({ length: 6 }, (_, i) => {
    const [x, y] = [quarter(next), quarter(next)];
    return { at: T0 + 60_000 * (i + 1), value: x, payload: { 'probe.depth': x, probe: { depth: y } } };
  }));
  assert.equal(got.map((r) => r[0]), [2, 4, 6, 8, 10, 12], 'two readings per report');
});

memory('given a restart of the platform, then the windows are seeded again from the read models and the results stay the database\'s', async (ctx) => {
  const topic = `${ROOT}/a`;
  const source = (await deviceOf(ctx.t, topic))._id as string;
  const calcs = (await ctx.t.platform.deps.db.selectFrom('calculations').select(['id', 'definition']).where('deleted_at', 'is', null).execute())
    .filter((c) => c.definition.type === 'window' && (c.definition as { source: { deviceId: string } }).source.deviceId === source)
    .map((c) => {
      const d = c.definition as { aggregation: WindowAggregation; window: { seconds: number }; destination: { deviceId: string; field: string } };
      return { id: c.id, aggregation: d.aggregation, seconds: d.window.seconds, destination: d.destination.deviceId, field: d.destination.field };
    });
  assert.is(calcs.length, AGGREGATIONS.length);
  const last = Date.parse(((await reportsOf(ctx.t, source)).at(-1)!.data as { reportedAt: string }).reportedAt);
  const url = ctx.t.platform.deps.config.databaseUrl!;
  await ctx.mqtt.endAsync();
  await ctx.t.stop();
  ctx.t = await startTestPlatform({ databaseUrl: url, metricsToken: TOKEN }, { clock: ctx.clock.now });
  ctx.mqtt = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  const next = random(17);
  await checkEach(ctx, topic, source, 'level', calcs, Array.from({ length: 20 }, (_, i) => ({ at: last + 20_000 * (i + 1), value: quarter(next) })));
  assert.equal(await runs(ctx.t), { memory: 20 * calcs.length, database: 0 }, 'the first run seeded the series again; memory answered every run');
});

memory.run();

const fallback = suite<Ctx>('windows in memory: what is left to the database');

fallback.before(async (ctx) => {
  ctx.clock = new TestClock();
  ctx.clock.set(T0);
  // Room for 40 readings in all: one series fits, a chattier one does not.
  ctx.t = await startTestPlatform({ metricsToken: TOKEN, calculationWindowReadings: 40 }, { clock: ctx.clock.now });
  ctx.p = await givenProvider(ctx.t, 'fallback-provider', ['small', 'large', 'late'].map((n) => `${ROOT}/${n}`));
  ctx.mqtt = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
});
fallback.after(async (ctx) => {
  await ctx.mqtt.endAsync();
  await ctx.t.stop();
});

fallback('given a series with more readings in its window than memory may hold, then its runs go to the database and give the same results, while a small one stays in memory', async (ctx) => {
  const next = random(23);
  await report(ctx, `${ROOT}/small`, { power: 1 }, T0);
  await report(ctx, `${ROOT}/large`, { power: 1 }, T0);
  const small = (await deviceOf(ctx.t, `${ROOT}/small`))._id as string;
  const large = (await deviceOf(ctx.t, `${ROOT}/large`))._id as string;
  const smallCalcs = await givenWindows(ctx.t, small, 'power', 60, ['mean', 'count']);
  const largeCalcs = await givenWindows(ctx.t, large, 'power', 3600, ['mean', 'count', 'difference']);

  let before = await runs(ctx.t);
  // The small series: a reading every 20 s over a 60 s window, so it holds a handful at a time.
  await checkEach(ctx, `${ROOT}/small`, small, 'power', smallCalcs, Array.from({ length: 10 }, (_, i) => ({ at: T0 + 20_000 * (i + 1), value: quarter(next) })));
  let after = await runs(ctx.t);
  assert.equal({ memory: after.memory - before.memory, database: after.database - before.database }, { memory: 20, database: 0 });

  // The large series: 60 readings inside an hour; past about 30 of them it no longer fits beside the small one.
  before = after;
  await checkEach(ctx, `${ROOT}/large`, large, 'power', largeCalcs, Array.from({ length: 60 }, (_, i) => ({ at: T0 + 10_000 * (i + 1), value: quarter(next) })));
  after = await runs(ctx.t);
  assert.is(after.memory - before.memory + after.database - before.database, 180);
  assert.ok(after.memory - before.memory > 0, 'while it fitted, memory answered');
  assert.ok(after.database - before.database >= 3 * 20, `once it outgrew the room, the database did: ${JSON.stringify({ before, after })}`);
  const m = await scrape(ctx.t.baseUrl, TOKEN);
  assert.ok(m.value('platform_calculation_window_readings')! <= 40, 'memory stays within CALCULATION_WINDOW_READINGS');
});

fallback('given a report older than the readings a series holds, then that run goes to the database; a later one that is less late is answered from memory, with the older report as the reading before its window', async (ctx) => {
  const next = random(29);
  await report(ctx, `${ROOT}/late`, { depth: 1 }, T0);
  const late = (await deviceOf(ctx.t, `${ROOT}/late`))._id as string;
  const calcs = await givenWindows(ctx.t, late, 'depth', 60, ['sum', 'difference']);
  const base = T0 + 86_400_000;
  // The series keeps its 60 s window and a minute of slack behind the latest run: after the run at 210 s, the readings after 90 s.
  await checkEach(ctx, `${ROOT}/late`, late, 'depth', calcs, [0, 30, 60, 85, 120, 150, 180, 210].map((s) => ({ at: base + s * 1000, value: quarter(next) })));
  let before = await runs(ctx.t);
  // At 88 s: its window (28 s, 88 s] reaches before what the series holds.
  await checkEach(ctx, `${ROOT}/late`, late, 'depth', calcs, [{ at: base + 88_000, value: quarter(next) }]);
  let after = await runs(ctx.t);
  assert.equal({ memory: after.memory - before.memory, database: after.database - before.database }, { memory: 0, database: 2 });
  // At 155 s: its window (95 s, 155 s] is held, and the reading before it is the one at 88 s, not the one at 85 s.
  before = after;
  await checkEach(ctx, `${ROOT}/late`, late, 'depth', calcs, [{ at: base + 155_000, value: quarter(next) }]);
  after = await runs(ctx.t);
  assert.equal({ memory: after.memory - before.memory, database: after.database - before.database }, { memory: 2, database: 0 });
});

fallback.run();
