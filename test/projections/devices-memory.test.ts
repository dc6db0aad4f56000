/**
 * The devices projection remembers documents and history fields between
 * batches, and only what committed: a batch whose transaction fails leaves
 * nothing remembered, and a row that is no longer at the remembered revision
 * is read from the table.
 */
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import type { Database } from '../../projections/database.js';
import { devicesProjection } from '../../projections/devices.js';
import type { Projection } from '../../projections/runner.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent } from '../eventstore/contract.js';
import { JSON_CHUNK } from '../../domain/shared/jsonb.js';

interface Ctx {
  pool: pg.Pool;
  db: Kysely<Database>;
  store: EventStore;
}

const memory = suite<Ctx>('devices projection: what it remembers between batches');

memory.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: ctx.pool }) });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
});
memory.after(async (ctx) => {
  await ctx.db.destroy();
});

const at = '2026-11-24T10:00:00.000Z';
const registered = (id: string) => newEvent('DeviceRegistered', { id, createdBy: 'user-1', doc: { name: id }, at });
const reported = (id: string, payload: Record<string, unknown>, time: string) => newEvent('DeviceReported', { id, topic: `t/${id}`, path: [], payload, reportedAt: time });

async function fields(db: Kysely<Database>, id: string): Promise<string[]> {
  const rows = await db.selectFrom('device_history_fields').select('field').where('device_id', '=', id).orderBy('field').execute();
  return rows.map((r) => r.field);
}

async function docOf(db: Kysely<Database>, id: string): Promise<Record<string, unknown>> {
  const row = await db.selectFrom('devices').select(['doc']).where('id', '=', id).executeTakeFirstOrThrow();
  return row.doc as Record<string, unknown>;
}

/** Stores the events on the device's stream and answers them as recorded. */
async function stored(store: EventStore, id: string, events: ReturnType<typeof newEvent>[]): Promise<RecordedEvent[]> {
  const before = (await store.readStream(`device-${id}`)).length;
  await store.append(`device-${id}`, events, before === 0 ? 'no_stream' : 'exists');
  return (await store.readStream(`device-${id}`)).slice(before);
}

/** Applies a batch as the runner does: in a transaction, then `committed`. */
async function applied(db: Kysely<Database>, projection: Projection, batch: RecordedEvent[]): Promise<void> {
  await db.transaction().execute((tx) => projection.apply(tx, batch));
  projection.committed?.(batch);
}

memory('given a batch whose transaction fails after the devices projection applied it, when it is applied again, then its history fields are stored (nothing of the failed one was remembered)', async ({ db, store }) => {
  const devices = devicesProjection();
  await applied(db, devices, await stored(store, 'm1', [registered('m1')]));
  const report = await stored(store, 'm1', [reported('m1', { temperature: 20 }, '2026-11-24T10:01:00.000Z')]);
  const failure = await db
    .transaction()
    .execute(async (tx) => {
      await devices.apply(tx, report);
      throw new Error('a later projection of the same batch fails');
    })
    .catch((error: Error) => error);
  assert.instance(failure, Error);
  assert.equal(await fields(db, 'm1'), [], 'the failed batch stored nothing');
  await applied(db, devices, report);
  assert.equal(await fields(db, 'm1'), ['temperature']);
  assert.equal((await docOf(db, 'm1')).temperature, 20);
});

memory('given a remembered device, when its row is written behind the projection (another revision), then the next report folds onto the row as it is in the table', async ({ db, store }) => {
  const devices = devicesProjection();
  await applied(db, devices, await stored(store, 'm2', [registered('m2'), reported('m2', { a: 1 }, '2026-11-24T10:01:00.000Z')]));
  // As something other than this projection instance could leave it: another revision, other content.
  await sql`UPDATE devices SET doc = doc || '{"b": 2}'::jsonb, revision = 0 WHERE id = 'm2'`.execute(db);
  await applied(db, devices, await stored(store, 'm2', [reported('m2', { c: 3 }, '2026-11-24T10:02:00.000Z')]));
  const doc = await docOf(db, 'm2');
  assert.equal([doc.a, doc.b, doc.c], [1, 2, 3], 'the row in the table, not the remembered document, was folded');
});

memory('given a remembered device whose row another instance already moved past (a leader that took over), when the same report arrives here, then it is applied once: no second history row, the same document', async ({ db, store }) => {
  const here = devicesProjection();
  await applied(db, here, await stored(store, 'm5', [registered('m5'), reported('m5', { a: 1 }, '2026-11-24T10:01:00.000Z')]));
  const next = await stored(store, 'm5', [reported('m5', { a: 2 }, '2026-11-24T10:02:00.000Z')]);
  await applied(db, devicesProjection(), next);
  const after = await docOf(db, 'm5');
  await applied(db, here, next);
  const { n } = await db.selectFrom('device_history').select((eb) => eb.fn.countAll<string>().as('n')).where('device_id', '=', 'm5').executeTakeFirstOrThrow();
  assert.is(Number(n), 2, 'one history row per report');
  assert.equal(await docOf(db, 'm5'), after);
  const later = await stored(store, 'm5', [reported('m5', { b: 3 }, '2026-11-24T10:03:00.000Z')]);
  await applied(db, here, later);
  const doc = await docOf(db, 'm5');
  assert.equal([doc.a, doc.b], [2, 3], 'the next report folds onto the row as the other instance left it');
});

memory('given a remembered device at the row\'s revision, when a report arrives, then it folds onto the remembered document and the result equals a fold from scratch', async ({ db, store }) => {
  const devices = devicesProjection();
  const first = await stored(store, 'm3', [registered('m3'), reported('m3', { a: 1 }, '2026-11-24T10:01:00.000Z')]);
  await applied(db, devices, first);
  const second = await stored(store, 'm3', [reported('m3', { a: 2, b: true }, '2026-11-24T10:02:00.000Z')]);
  await applied(db, devices, second);
  const remembered = await docOf(db, 'm3');
  await sql`DELETE FROM devices WHERE id = 'm3'`.execute(db);
  const fresh = devicesProjection();
  await applied(db, fresh, [...first, ...second]);
  assert.equal(await docOf(db, 'm3'), remembered);
  assert.equal(await fields(db, 'm3'), ['a', 'b']);
});

memory('given a report of every kind of value, when it is applied, then history keeps each exactly as reported', async ({ db, store }) => {
  const devices = devicesProjection();
  const payload = {
    quoted: 'say "hi", {braces} and \\ back\\slash',
    nullWord: 'NULL',
    empty: '',
    spaced: '  edges  ',
    unicode: 'åäö ✓ 🚀',
    negative: -12.5,
    tiny: 1e-300,
    large: 1.7976931348623157e308,
    flag: false,
    nested: { on: true, level: 3 },
  };
  await applied(db, devices, await stored(store, 'm4', [registered('m4'), reported('m4', payload, '2026-11-24T10:01:00.123Z')]));
  const rows = await db.selectFrom('device_history').select(['time', 'fields']).where('device_id', '=', 'm4').execute();
  assert.is(rows.length, 1, 'one history row per report');
  assert.is(rows[0]!.time.toISOString(), '2026-11-24T10:01:00.123Z');
  // Each field's series, as readers take it, gives the value back with its kind.
  const series = await sql<{ field: string; num: number | null; bool: boolean | null; str: string | null }>`
    SELECT f.field, s.num, s.bool, s.str FROM unnest(${Object.keys(rows[0]!.fields)}::text[]) AS f(field), device_series('m4', f.field) s`.execute(db);
  assert.equal(Object.fromEntries(series.rows.map((r) => [r.field, r.str ?? r.bool ?? r.num])), rows[0]!.fields);
  assert.is(series.rows.find((r) => r.field === 'flag')!.num, 0, 'a boolean counts as 0 or 1 in numeric calculations');
  const values = rows[0]!.fields;
  assert.equal(values, {
    empty: '',
    flag: false,
    large: 1.7976931348623157e308,
    negative: -12.5,
    'nested.level': 3,
    'nested.on': true,
    nullWord: 'NULL',
    quoted: payload.quoted,
    spaced: '  edges  ',
    tiny: 1e-300,
    unicode: 'åäö ✓ 🚀',
  });
  assert.ok(rows.every((r) => new Date(r.time as unknown as string).toISOString() === '2026-11-24T10:01:00.123Z'));
});

memory('given a batch of more devices than one JSON text of rows holds, when registered and then reported in two batches, then every row holds its own document', async ({ db, store }) => {
  const projection = devicesProjection();
  const ids = Array.from({ length: 3 * JSON_CHUNK + 5 }, (_, i) => `many-${i}`);
  const registrations: RecordedEvent[] = [];
  for (const id of ids) registrations.push(...(await stored(store, id, [registered(id)])));
  await applied(db, projection, registrations);
  const reports: RecordedEvent[] = [];
  for (const [i, id] of ids.entries()) reports.push(...(await stored(store, id, [reported(id, { temperature: i, unit: '°C', note: `"${id}"` }, at)])));
  // Remembered now: the reports take the guarded update, whose rows are one parameter too.
  await applied(db, projection, reports);
  for (const [i, id] of ids.entries()) {
    const doc = await docOf(db, id);
    assert.equal([doc.name, doc.temperature, doc.unit, doc.note], [id, i, '°C', `"${id}"`], id);
  }
});

memory.run();
