import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Database } from '../../projections/database.js';
import { calculationsProjection } from '../../projections/calculations.js';
import { logsProjection } from '../../projections/logs.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import type { CalculationDefinition } from '../../domain/calculations/calculation.js';
import { createTestDatabase } from '../support/cluster.js';

const id = 'c0000000000000000000000a';
const [a, c] = ['d0000000000000000000000a', 'd0000000000000000000000c'];
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const definition: CalculationDefinition = { name: 'max', type: 'lastValue', sources: [{ deviceId: a, field: 'x' }], destination: { deviceId: c, field: 'y' }, aggregation: 'max', schedule: { type: 'onChange' } };
const replaced: CalculationDefinition = { name: 'windowed', type: 'window', source: { deviceId: a, field: 'x' }, window: { seconds: 60 }, destination: { deviceId: c, field: 'y' }, aggregation: 'last', schedule: { type: 'interval', seconds: 60 } };

let sequence = 0;
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
function recorded(streamId: string, revision: number, type: string, data: unknown, actor = owner): RecordedEvent {
  sequence++;
  return { id: uuid(sequence), type, data, streamId, revision, position: { commit: 1000n + BigInt(sequence), prepare: BigInt(sequence) }, metadata: { actor, correlationId: 'test', time: '2026-01-01T00:00:00.000Z' } };
}
const stream = `calculation-${id}`;
const result = (revision: number, value: number, reportedAt: string) =>
  recorded(`device-${c}`, revision, 'DeviceReported', { id: c, topic: `calculation:${id}`, path: [], payload: { y: value }, reportedAt }, `calculation:${id}`);

const created = recorded(stream, 0, 'CalculationCreated', { id, createdBy: owner, definition, at: '2026-01-01T10:00:00.000Z' });
const r1 = result(0, 4, '2026-01-01T10:01:00.000Z');
const halted = recorded(stream, 1, 'CalculationHalted', { id, reason: `its owner cannot read the source iotnode ${a}`, at: '2026-01-01T10:02:00.000Z' }, `calculation:${id}`);
const resumed = recorded(stream, 2, 'CalculationResumed', { id, at: '2026-01-01T10:03:00.000Z' }, `calculation:${id}`);
const r2 = result(1, 9, '2026-01-01T10:04:00.000Z');
const replace = recorded(stream, 3, 'CalculationReplaced', { id, definition: replaced, at: '2026-01-01T10:05:00.000Z' });
const deleted = recorded(stream, 4, 'CalculationDeleted', { id, at: '2026-01-01T10:06:00.000Z' });
const history = [created, r1, halted, resumed, r2, replace, deleted];

const projection = suite<{ db: Kysely<Database> }>('calculations read model');

projection.before.each(async (ctx) => {
  ctx.db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: await createTestDatabase(), max: 2 }) }) });
});
projection.after.each(async (ctx) => {
  await ctx.db.destroy();
});

const apply = (db: Kysely<Database>, batch: RecordedEvent[]) =>
  db.transaction().execute(async (tx) => {
    await calculationsProjection.apply(tx, batch);
    await logsProjection.apply(tx, batch);
  });

async function rows(db: Kysely<Database>): Promise<string[]> {
  const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(x) AS row FROM calculations x UNION ALL SELECT to_jsonb(l) FROM device_logs l`.execute(db);
  return rows.map((r) => JSON.stringify(r.row)).sort();
}

projection('given every event of a calculation applied in one batch, then the row holds its last definition, status and result', async ({ db }) => {
  await apply(db, history.slice(0, 5));
  const row = await db.selectFrom('calculations').selectAll().executeTakeFirstOrThrow();
  assert.equal(
    [row.definition, row.schedule, row.halted, row.last_value, row.last_reported_at?.toISOString(), Number(row.revision), row.deleted_at],
    [definition, 'onChange', null, 9, '2026-01-01T10:04:00.000Z', 2, null],
  );
  const logs = await db.selectFrom('device_logs').select(['id', 'resource_id', 'resource_type', 'type']).orderBy('time').execute();
  assert.equal(logs, [
    { id: halted.id, resource_id: id, resource_type: 'calculation', type: 'error' },
    { id: resumed.id, resource_id: id, resource_type: 'calculation', type: 'info' },
  ]);
  await apply(db, history.slice(5));
  const after = await db.selectFrom('calculations').selectAll().executeTakeFirstOrThrow();
  assert.equal([after.type, after.schedule, after.definition, after.deleted_at?.toISOString()], ['window', 'interval', replaced, '2026-01-01T10:06:00.000Z']);
});

projection('given the events applied, when the same batch is applied again, then nothing changes', async ({ db }) => {
  await apply(db, history);
  const once = await rows(db);
  await apply(db, history);
  assert.equal(await rows(db), once);
});

projection('given the events applied one by one, when each is applied twice, then the rows equal one application of each', async ({ db }) => {
  for (const e of history) await apply(db, [e]);
  const once = await rows(db);
  for (const e of history) {
    await apply(db, [e]);
    await apply(db, [e]);
  }
  assert.equal(await rows(db), once);
});

projection('given a newer result, when an older result is applied again, then the last result stays the newer one', async ({ db }) => {
  await apply(db, [created, r1, r2]);
  await apply(db, [r1]);
  const row = await db.selectFrom('calculations').select(['last_value', 'last_reported_at']).executeTakeFirstOrThrow();
  assert.equal([row.last_value, row.last_reported_at?.toISOString()], [9, '2026-01-01T10:04:00.000Z']);
});

projection('given a replaced calculation, when the create and a halt are applied again, then the replacement stays', async ({ db }) => {
  await apply(db, [created, halted, resumed, replace]);
  await apply(db, [created, halted]);
  const row = await db.selectFrom('calculations').select(['definition', 'halted']).executeTakeFirstOrThrow();
  assert.equal([row.definition, row.halted], [replaced, null]);
});

projection.run();
