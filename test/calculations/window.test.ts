/**
 * End to end: an hour and a half of reports over MQTT, each with its own
 * `reportedAt` (the platform clock, set by the test, stamps each message as
 * it arrives), feed one `window` calculation per aggregation over the last
 * hour. Every result is compared with the same aggregation computed here,
 * independently, from what was published; a rebuild from the events then
 * reproduces every read model, results included, and computes nothing again.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { TestClock } from '../support/clock.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish } from '../ingest/support.js';
import { eventCount } from '../users/given.js';
import { rebuild } from '../../projections/rebuild.js';
import { givenCalculation, givenDevice, random, readings, windowOf } from './given.js';

const TOPIC = 'svc/generic/v2/hour/meter';
const HOUR = 3600_000;
const T0 = Date.parse('2026-06-01T00:00:00.000Z');
const AGGREGATIONS = ['mean', 'sum', 'min', 'max', 'count', 'first', 'last', 'difference'] as const;
type Aggregation = (typeof AGGREGATIONS)[number];

interface Reading {
  time: number;
  value: number;
}

/**
 * Readings every 20 to 100 s for 90 minutes after T0, with two placed so that
 * one window starts exactly on a reading (the start is left out), values with
 * two decimals between -10 and 40.
 */
function schedule(): Reading[] {
  const next = random(13);
  const times = new Set<number>([T0 + 5 * 60_000, T0 + 65 * 60_000]);
  for (let at = T0 + 20_000; at < T0 + 90 * 60_000; at += 20_000 + Math.floor(next() * 80) * 1000) times.add(at);
  return [...times].sort((x, y) => x - y).map((time) => ({ time, value: Math.round((next() * 50 - 10) * 100) / 100 }));
}

/** The expected result for a window ending at `end`, from the readings alone. */
function expected(all: Reading[], end: number, aggregation: Aggregation): number | null {
  const inside = all.filter((r) => r.time > end - HOUR && r.time <= end);
  const values = inside.map((r) => r.value);
  if (aggregation === 'count') return inside.length;
  if (inside.length === 0) return null;
  switch (aggregation) {
    case 'mean':
      return values.reduce((x, y) => x + y, 0) / values.length;
    case 'sum':
      return values.reduce((x, y) => x + y, 0);
    case 'min':
      return Math.min(...values);
    case 'max':
      return Math.max(...values);
    case 'first':
      return values[0]!;
    case 'last':
      return values[values.length - 1]!;
    case 'difference': {
      const before = all.filter((r) => r.time <= end - HOUR).at(-1);
      return values[values.length - 1]! - (before ? before.value : values[0]!);
    }
  }
}

const close = (actual: unknown, want: number) => typeof actual === 'number' && Math.abs(actual - want) <= 1e-9 * Math.max(1, Math.abs(want));

const e2e = suite<{ t: TestPlatform; clock: TestClock }>('a window calculation over an hour of MQTT reports');

e2e.before(async (ctx) => {
  ctx.clock = new TestClock();
  ctx.t = await startTestPlatform({}, { clock: ctx.clock.now });
});
e2e.after(async (ctx) => {
  await ctx.t.stop();
});

e2e('given an hour and a half of reports, then each window result equals the aggregation computed independently; a rebuild reproduces them exactly', async ({ t, clock }) => {
  const p = await givenProvider(t, 'hour-meter', [TOPIC]);
  const client = await connectMqtt(t, p.username, p.password);
  // Readings from before the calculation exists are in the windows too: the meter reports from T0 − 30 min.
  const early: Reading[] = [{ time: T0 - 30 * 60_000, value: 12.5 }, { time: T0 - 10 * 60_000, value: 14 }];
  clock.set(early[0]!.time);
  await publish(client, TOPIC, { energy: early[0]!.value });
  const meter = (await deviceOf(t, TOPIC))._id as string;
  clock.set(early[1]!.time);
  await publish(client, TOPIC, { energy: early[1]!.value });
  const hourly = await givenDevice(t, 'hourly');
  const calcs = new Map<Aggregation, string>();
  for (const aggregation of AGGREGATIONS) {
    calcs.set(aggregation, (await givenCalculation(t, windowOf([meter, 'energy'], 3600, [hourly, `${aggregation}Hour`], aggregation, { type: 'onChange' }, `energy ${aggregation}`)))._id);
  }

  const reports = schedule();
  assert.ok(reports.length >= 60, `an hour and a half of reports (${reports.length})`);
  for (const r of reports) {
    clock.set(r.time);
    await publish(client, TOPIC, { energy: r.value });
  }
  await client.endAsync();

  const all = [...early, ...reports];
  for (const aggregation of AGGREGATIONS) {
    const rows = await eventually(async () => {
      const got = await readings(t, hourly, `${aggregation}Hour`);
      return got.length >= reports.length ? got : undefined;
    }, 20_000, `every ${aggregation} result`);
    assert.is(rows.length, reports.length, `one ${aggregation} result per report`);
    rows.forEach((row, i) => {
      const end = reports[i]!.time;
      const want = expected(all, end, aggregation)!;
      assert.is(row.time, new Date(end).toISOString());
      assert.ok(close(row.value, want), `${aggregation} at ${row.time}: got ${row.value}, computed ${want}`);
    });
  }
  // The window ending at T0 + 65 min starts exactly on the reading at T0 + 5 min, which it leaves out.
  const at65 = reports.findIndex((r) => r.time === T0 + 65 * 60_000);
  assert.is(expected(all, reports[at65]!.time, 'first'), reports[reports.findIndex((r) => r.time === T0 + 5 * 60_000) + 1]!.value);

  const last = reports.at(-1)!;
  const mean = await t.call('GET', `/api/calculations/${calcs.get('mean')}`);
  assert.equal(mean.body.lastResult.reportedAt, new Date(last.time).toISOString());
  assert.ok(close(mean.body.lastResult.value, expected(all, last.time, 'mean')!));

  const { db, store } = t.platform.deps;
  const events = await eventCount(t);
  const live = await snapshotReadModels(db);
  assert.is(live.calculations!.length, AGGREGATIONS.length);
  await t.platform.deps.projections.stop();
  try {
    await rebuild(store, db, pino({ level: 'silent' }));
    assert.equal(await snapshotReadModels(db), live, 'the rebuilt read models equal the live ones, results included');
  } finally {
    await t.platform.deps.projections.start();
  }
  await new Promise((r) => setTimeout(r, 500));
  assert.is(await eventCount(t), events, 'a rebuild computes nothing again: the results are events');
  assert.ok(close((await readings(t, hourly, 'meanHour')).at(-1)!.value, expected(all, last.time, 'mean')!));
});

e2e.run();
