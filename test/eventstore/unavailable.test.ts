/**
 * A handler that waits for the read models and gives up (`UnavailableError`:
 * the projection runner is slow, paused or swapping a rebuild) has learned
 * nothing about the event: the subscriber tries the event again until the read
 * models answer, and never sets it aside. An event whose handler fails for any
 * other reason, while the database answers, is set aside as before.
 */
import pg from 'pg';
import { pino } from 'pino';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber } from '../../domain/eventstore/subscriber.js';
import { UnavailableError } from '../../domain/shared/errors.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from './contract.js';

interface Ctx {
  pool: pg.Pool;
  db: Kysely<unknown>;
  store: EventStore;
}

const unavailable = suite<Ctx>('a subscriber whose read models are behind');

unavailable.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: ctx.pool }) });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
});
unavailable.after(async (ctx) => {
  await ctx.db.destroy();
});

/** A subscriber `name` whose handler throws `failure()` for the first `failures` tries of a `Wait` event of `stream`, then keeps it. */
function failing(ctx: Ctx, name: string, stream: string, failures: number, failure: () => Error) {
  const done: RecordedEvent[] = [];
  let tries = 0;
  const subscriber = new CheckpointedSubscriber<unknown>({
    name,
    store: ctx.store,
    db: ctx.db,
    log: pino({ level: 'silent' }),
    handle: async (batch) => {
      const mine = batch.filter((e) => e.streamId === stream);
      if (mine.some((e) => e.type === 'Wait') && ++tries <= failures) throw failure();
      done.push(...mine);
      return mine.length > 0;
    },
  });
  return { subscriber, done, tries: () => tries };
}

const parkedOf = async (ctx: Ctx, name: string) =>
  (await sql<{ type: string }>`SELECT type FROM es.parked_events WHERE subscriber = ${name}`.execute(ctx.db)).rows.map((r) => r.type);

unavailable('given a handler that waits for the read models and times out four times, when they answer at last, then the event is handled then, in order, and never parked', async (ctx) => {
  const stream = streamName('unavailable');
  const { subscriber, done, tries } = failing(ctx, 'unavailable-test', stream, 4, () => new UnavailableError('the read models did not catch up within 30000 ms'));
  await ctx.store.append(stream, [newEvent('Wait'), newEvent('After')], 'no_stream');
  await subscriber.start();
  try {
    await waitUntil(() => done.length === 2, 'the events were handled once the read models answered', 15_000);
    assert.is(tries(), 5, 'four failed tries, then the one that held');
    assert.equal(done.map((e) => e.type), ['Wait', 'After']);
    assert.equal(await parkedOf(ctx, 'unavailable-test'), []);
    assert.is(subscriber.parked, 0);
  } finally {
    await subscriber.stop();
  }
});

unavailable('given a handler that fails on an event for another reason while the database answers, then that event is parked and the next is handled', async (ctx) => {
  const stream = streamName('poison');
  const { subscriber, done } = failing(ctx, 'poison-test', stream, Infinity, () => new Error('this event cannot be handled'));
  await ctx.store.append(stream, [newEvent('Wait'), newEvent('After')], 'no_stream');
  await subscriber.start();
  try {
    await waitUntil(() => done.length === 1, 'the event after the poison was handled', 15_000);
    assert.equal(done.map((e) => e.type), ['After']);
    assert.equal(await parkedOf(ctx, 'poison-test'), ['Wait']);
  } finally {
    await subscriber.stop();
  }
});

unavailable.run();
