/**
 * A batch and the runner's checkpoint commit together: a projection that
 * throws partway through a batch leaves neither its rows nor a checkpoint
 * behind, and the batch is applied again, once, when the projection recovers.
 */
import pg from 'pg';
import { pino } from 'pino';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import type { Position } from '../../domain/shared/events.js';
import type { Database } from '../../projections/database.js';
import { ProjectionRunner, type Projection } from '../../projections/runner.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from '../eventstore/contract.js';

interface Ctx {
  pool: pg.Pool;
  db: Kysely<Database>;
  store: EventStore;
}

const test = suite<Ctx>('projection runner: a batch and its checkpoint commit together');

test.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: ctx.pool }) });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
  // Rows without a key: a batch applied twice, or half of a failed one kept, shows up as a row count.
  await sql`CREATE TABLE probe_rows (event_id uuid NOT NULL, type text NOT NULL)`.execute(ctx.db);
});
test.after(async (ctx) => {
  await ctx.db.destroy();
});

const RUNNER = 'atomic-batch-test';

async function storedCheckpoint(db: Kysely<Database>): Promise<Position | null> {
  const { rows } = await sql<{ c: string; p: string }>`
    SELECT commit_position::text AS c, prepare_position::text AS p FROM es.checkpoints WHERE name = ${RUNNER}`.execute(db);
  return rows[0] ? { commit: BigInt(rows[0].c), prepare: BigInt(rows[0].p) } : null;
}

async function rowsPerEvent(db: Kysely<Database>): Promise<Record<string, number>> {
  const { rows } = await sql<{ event_id: string; n: number }>`SELECT event_id, count(*)::int AS n FROM probe_rows GROUP BY event_id`.execute(db);
  return Object.fromEntries(rows.map((r) => [r.event_id, r.n]));
}

test('given a projection that throws on the third event of a batch, when the batch arrives, then no row and no checkpoint of it is stored; when the projection recovers, then the batch is applied once', async ({ db, store }) => {
  let failing = false;
  let failures = 0;
  /** The ids of each batch `apply` finished without throwing. */
  const completed: string[][] = [];
  const probe: Projection = {
    name: 'probe',
    tables: ['probe_rows'],
    async apply(tx, batch) {
      for (const event of batch) {
        // The rows written before the throw are part of the batch's transaction.
        await sql`INSERT INTO probe_rows (event_id, type) VALUES (${event.id}::uuid, ${event.type})`.execute(tx);
        if (failing && event.type === 'Poisoned') {
          failures++;
          throw new Error('the projection cannot handle this event yet');
        }
      }
      completed.push(batch.map((e) => e.id));
    },
  };
  const runner = new ProjectionRunner(store, db, [probe], pino({ level: 'silent' }), RUNNER);
  await runner.start();
  try {
    // Given one applied batch.
    const applied = [newEvent('Fine'), newEvent('Fine')];
    const first = await store.append(streamName('probe'), applied, 'no_stream');
    await runner.waitFor(first.position, 5_000);
    assert.equal(await storedCheckpoint(db), first.position);

    // When a batch whose third event makes the projection throw arrives.
    failing = true;
    const batch = [newEvent('Fine'), newEvent('Fine'), newEvent('Poisoned'), newEvent('Fine')];
    const second = await store.append(streamName('probe'), batch, 'no_stream');
    await waitUntil(() => failures >= 1, 'the projection failed on the batch');
    await waitUntil(() => !runner.healthy, 'the runner reports the failure');

    // Then nothing of that batch is stored: no rows, and the checkpoint has not moved.
    assert.equal(await rowsPerEvent(db), Object.fromEntries(applied.map((e) => [e.id, 1])));
    assert.equal(await storedCheckpoint(db), first.position);
    assert.equal(runner.checkpoint, first.position);

    // When the projection recovers, then the batch is applied again, once, with its checkpoint.
    failing = false;
    await runner.waitFor(second.position, 10_000);
    assert.ok(runner.healthy);
    assert.equal(await rowsPerEvent(db), Object.fromEntries([...applied, ...batch].map((e) => [e.id, 1])));
    assert.equal(await storedCheckpoint(db), second.position);
    const ids = batch.map((e) => e.id);
    assert.is(completed.filter((c) => JSON.stringify(c) === JSON.stringify(ids)).length, 1, 'the batch was completed exactly once');
    assert.equal(completed, [applied.map((e) => e.id), ids]);
  } finally {
    await runner.stop();
  }
});

test.run();
