/**
 * The two ways the reactor aggregates a window agree: one SQL statement per
 * window (a source that reported once in a batch), and one read of the series
 * aggregated in memory (a source that reported several times). Against real
 * PostgreSQL, over readings with numbers, booleans, strings, equal times and
 * windows that start exactly on a reading.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Database } from '../../projections/database.js';
import { seriesWindowStats, windowStats } from '../../reactors/calculations/readings.js';
import type { WindowStats } from '../../domain/calculations/aggregate.js';
import { createTestDatabase } from '../support/cluster.js';

const device = 'd00000000000000000000001';
const T0 = Date.parse('2026-07-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

const readings = suite<{ db: Kysely<Database> }>('window statistics');

readings.before(async (ctx) => {
  ctx.db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: await createTestDatabase(), max: 4 }) }) });
  const rows: Database['device_history'][] = [];
  let seed = 7;
  const next = () => ((seed = (seed * 16807) % 2147483647) / 2147483647);
  for (let i = 0; i < 400; i++) {
    const time = new Date(T0 + Math.floor(i * 9_000 + next() * 4_000));
    const kind = i % 23 === 0 ? 'str' : i % 17 === 0 ? 'bool' : 'num';
    const level = kind === 'num' ? Math.round(next() * 10_000) / 100 - 20 : kind === 'bool' ? i % 2 === 1 : `s${i}`;
    rows.push({ device_id: device, time, fields: { level } });
  }
  // Three readings at the same time, and one exactly an hour before another.
  rows.push({ device_id: device, time: new Date(T0 + 1_800_000), fields: { level: 7 } });
  rows.push({ device_id: device, time: new Date(T0 + 1_800_000), fields: { level: 'tied' } });
  rows.push({ device_id: device, time: new Date(T0 + 1_800_000), fields: { level: 5 } });
  rows.push({ device_id: device, time: new Date(T0 + 1_800_000 + 3_600_000), fields: { level: 6 } });
  // Reports of other fields between them: a series holds only the reports that brought its field.
  for (let i = 0; i < 50; i++) rows.push({ device_id: device, time: new Date(T0 + i * 70_000 + 500), fields: { other: i } });
  await ctx.db.insertInto('device_history').values(rows.map((r) => ({ ...r, fields: JSON.stringify(r.fields) as never }))).execute();
});
readings.after(async (ctx) => {
  await ctx.db.destroy();
});

const close = (a: WindowStats, b: WindowStats) => {
  const { sum: sa, mean: ma, ...restA } = a;
  const { sum: sb, mean: mb, ...restB } = b;
  assert.equal(restA, restB);
  for (const [x, y] of [[sa, sb], [ma, mb]] as const) {
    if (x === null || y === null) assert.is(x, y);
    else assert.ok(Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(y)), `${x} vs ${y}`);
  }
};

for (const seconds of [1, 600, 3600]) {
  readings(`given ${seconds} s windows ending on readings, between them, at equal times and before any reading, then both ways give the same statistics`, async ({ db }) => {
    const ends = [T0 - 1000, T0 + 1_800_000, T0 + 1_800_000 + 500, T0 + 5_400_000, T0 + 5_400_000 + 1, T0 + 12_345_678, T0 + 3_600_000 + 4_500, T0 + 3_000_000];
    const { rows } = await db.selectFrom('device_history').select('time').where('device_id', '=', device).where(sql<boolean>`fields ? 'level'`).orderBy('time').execute().then((r) => ({ rows: r }));
    for (const r of rows.filter((_, i) => i % 37 === 0)) ends.push(r.time.getTime());
    const single = await windowStats(db, ends.map((end) => ({ deviceId: device, field: 'level', end: iso(end), seconds })));
    const [many] = await seriesWindowStats(db, [{ deviceId: device, field: 'level', seconds, ends: ends.map(iso) }]);
    assert.is(many!.length, ends.length);
    ends.forEach((_, i) => close(many![i]!, single[i]!));
    assert.ok(single.some((s) => s.count > 1), 'some windows hold several readings');
    assert.ok(single.some((s) => s.count === 0), 'some windows are empty');
  });
}

readings('given a window ending exactly an hour after readings, then they are outside it and the last of them is the reading before', async ({ db }) => {
  const end = iso(T0 + 1_800_000 + 3_600_000);
  const [single] = await windowStats(db, [{ deviceId: device, field: 'level', end, seconds: 3600 }]);
  const [[many]] = (await seriesWindowStats(db, [{ deviceId: device, field: 'level', seconds: 3600, ends: [end, iso(T0)] }])) as [WindowStats[]];
  assert.is(single!.lastNum, 6);
  assert.is(many!.lastNum, 6);
  // At the start, three readings share one time; the last numeric of them in value order (7) is the one before.
  assert.is(single!.before, 7);
  assert.is(many!.before, 7);
});

readings('given readings at the same time, then first and last follow their values, whichever way, so no scan order decides', async ({ db }) => {
  const end = iso(T0 + 1_800_000);
  const [single] = await windowStats(db, [{ deviceId: device, field: 'level', end, seconds: 1 }]);
  const [[many]] = (await seriesWindowStats(db, [{ deviceId: device, field: 'level', seconds: 1, ends: [end, iso(T0 + 1_800_000 + 9_000)] }])) as [WindowStats[]];
  for (const s of [single!, many!]) assert.equal([s.count, s.first, s.last, s.firstNum, s.lastNum], [3, 5, 'tied', 5, 7]);
});

readings.run();
