/**
 * A side-effect subscriber whose handler finds nothing to do in a batch saves
 * its checkpoint later: with the next batch that had work, after
 * IDLE_SAVE_MS, or when it stops. One with work saves at once.
 */
import pg from 'pg';
import { pino } from 'pino';
import { Kysely, PostgresDialect } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber, IDLE_SAVE_MS, loadCheckpoint } from '../../domain/eventstore/subscriber.js';
import { comparePositions, type RecordedEvent } from '../../domain/shared/events.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from './contract.js';
import { until } from '../support/nodes.js';

interface Ctx {
  pool: pg.Pool;
  db: Kysely<unknown>;
  store: EventStore;
}

const idle = suite<Ctx>('checkpoints of batches with nothing to do');

idle.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: ctx.pool }) });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
});
idle.after(async (ctx) => {
  await ctx.db.destroy();
});

/** A side-effect subscriber named `name` that keeps the events of `stream` it handles and answers `worked` for each batch. */
function following(ctx: Ctx, name: string, stream: string, worked: (batch: RecordedEvent[]) => boolean, idleSaveMs = IDLE_SAVE_MS) {
  const seen: RecordedEvent[] = [];
  const subscriber = new CheckpointedSubscriber<unknown>({
    name,
    store: ctx.store,
    db: ctx.db,
    log: pino({ level: 'silent' }),
    idleSaveMs,
    handle: async (batch) => {
      seen.push(...batch.filter((e) => e.streamId === stream));
      return worked(batch);
    },
  });
  return { subscriber, seen };
}

/** The checkpoint of `name` once it reaches `position`: the subscriber writes it after its handler returns. */
const checkpointOnceAt = (ctx: Ctx, name: string, position: RecordedEvent['position']) =>
  until(
    async () => {
      const saved = await loadCheckpoint(ctx.db, name);
      return saved && comparePositions(saved, position) >= 0 ? saved : null;
    },
    5_000,
    `the checkpoint of ${name} to reach the handled event`,
  );

idle('given a subscriber that works only on "Work" events, when idle batches follow a saved one within its idle time, then the checkpoint stays until a batch with work, and stopping saves where it got to', async (ctx) => {
  const stream = streamName('idle');
  // Idle batches may go unsaved for a minute here, longer than the test runs, however slow the machine.
  const { subscriber, seen } = following(ctx, 'idle-test', stream, (batch) => batch.some((e) => e.type === 'Work'), 60_000);
  await ctx.store.append(stream, [newEvent('Work')], 'no_stream');
  await subscriber.start();
  await waitUntil(() => seen.length === 1, 'the first event was handled');
  const afterWork = await checkpointOnceAt(ctx, 'idle-test', seen[0]!.position);
  assert.ok(afterWork && comparePositions(afterWork, seen[0]!.position) === 0, 'a batch with work is saved at once');

  await ctx.store.append(stream, [newEvent('Noise')], 'exists');
  await waitUntil(() => seen.length === 2, 'the idle event was handled');
  await ctx.store.append(stream, [newEvent('Noise')], 'exists');
  await waitUntil(() => seen.length === 3, 'the second idle event was handled');
  assert.equal(await loadCheckpoint(ctx.db, 'idle-test'), afterWork, 'idle batches within the idle time are not saved');
  assert.equal(subscriber.position, seen[2]!.position, 'in memory it is where it got to');

  await ctx.store.append(stream, [newEvent('Work')], 'exists');
  await waitUntil(() => seen.length === 4, 'the second work event was handled');
  const saved = await checkpointOnceAt(ctx, 'idle-test', seen[3]!.position);
  assert.equal(saved, seen[3]!.position, 'work saves everything up to it');

  await ctx.store.append(stream, [newEvent('Noise')], 'exists');
  await waitUntil(() => seen.length === 5, 'the last idle event was handled');
  await subscriber.stop();
  assert.equal(await loadCheckpoint(ctx.db, 'idle-test'), seen[4]!.position, 'stopping saves the idle position');
});

idle('given idle batches for longer than IDLE_SAVE_MS, then the checkpoint is saved again', async (ctx) => {
  const stream = streamName('idle-long');
  const { subscriber, seen } = following(ctx, 'idle-long', stream, () => false);
  await subscriber.start();
  await ctx.store.append(stream, [newEvent('Noise')], 'no_stream');
  await waitUntil(() => seen.length === 1, 'the first idle event was handled');
  await new Promise((r) => setTimeout(r, IDLE_SAVE_MS + 50));
  await ctx.store.append(stream, [newEvent('Noise')], 'exists');
  await waitUntil(() => seen.length === 2, 'the second idle event was handled');
  assert.equal(await checkpointOnceAt(ctx, 'idle-long', seen[1]!.position), seen[1]!.position);
  await subscriber.stop();
});

idle.run();
