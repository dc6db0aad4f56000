/**
 * A subscriber's lag, as the metrics report it: the events stored after its
 * position and the age of the oldest of them, measured against the store, so
 * a subscriber that is stuck shows a lag that grows.
 */
import pg from 'pg';
import { pino } from 'pino';
import { Kysely, PostgresDialect } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber } from '../../domain/eventstore/subscriber.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from './contract.js';

interface Ctx {
  pool: pg.Pool;
  db: Kysely<unknown>;
  store: EventStore;
}

const lag = suite<Ctx>('subscriber lag in events and seconds');

lag.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: ctx.pool }) });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
});
lag.after(async (ctx) => {
  await ctx.db.destroy();
});

/** A subscriber whose handler waits at a gate until `open()`. */
function gated(ctx: Ctx, name: string, store: EventStore = ctx.store) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let handled = 0;
  const subscriber = new CheckpointedSubscriber<unknown>({
    name,
    store,
    db: ctx.db,
    log: pino({ level: 'silent' }),
    batchSize: 2,
    handle: async (batch) => {
      await gate;
      handled += batch.length;
    },
  });
  return { subscriber, open, handled: () => handled };
}

lag('given a subscriber that is held up, when events are stored, then its lag counts them and ages with the oldest; once it catches up, both are 0', async (ctx) => {
  const { subscriber, open, handled } = gated(ctx, 'lag-held');
  await subscriber.start();
  const caughtUp = await subscriber.lag();
  const stream = streamName('lag');
  const oldest = new Date(Date.now() - 30_000).toISOString();
  await ctx.store.append(stream, [newEvent('Happened', {}, { time: oldest })], 'no_stream');
  await ctx.store.append(stream, [newEvent(), newEvent(), newEvent(), newEvent()], 'exists');

  const behind = await subscriber.lag();
  assert.ok(behind.events >= 5 && behind.events <= caughtUp.events + 5, `5 events behind, got ${behind.events}`);
  assert.ok(behind.seconds >= 30 && behind.seconds < 120, `the oldest is 30 s old, got ${behind.seconds}`);
  const later = await subscriber.lag(Date.now() + 10_000);
  assert.ok(later.seconds >= behind.seconds + 9, 'a stuck subscriber’s lag grows with time');

  open();
  await waitUntil(() => handled() >= 5, 'the subscriber handles them');
  await waitUntil(() => subscriber.healthy, 'the subscriber runs');
  let now = await subscriber.lag();
  for (let tries = 0; now.events > 0 && tries < 100; tries++) {
    await new Promise((r) => setTimeout(r, 20));
    now = await subscriber.lag();
  }
  assert.equal(now, { events: 0, seconds: 0 });
  await subscriber.stop();
});

lag('given a store that cannot count (EventStoreDB), then the lag in events is counted up to one batch', async (ctx) => {
  const { countAfter: _, ...rest } = ctx.store;
  const uncounting: EventStore = rest;
  const { subscriber, open } = gated(ctx, 'lag-uncounted', uncounting);
  await subscriber.start();
  await ctx.store.append(streamName('lag'), [newEvent(), newEvent(), newEvent(), newEvent(), newEvent()], 'no_stream');
  const behind = await subscriber.lag();
  assert.is(behind.events, 2, 'one batch of 2, the subscriber’s batch size');
  open();
  await subscriber.stop();
});

lag('countAfter counts what readAll would return after a position, up to the cap', async (ctx) => {
  const stream = streamName('count');
  const first = await ctx.store.append(stream, [newEvent()], 'no_stream');
  await ctx.store.append(stream, [newEvent(), newEvent(), newEvent()], 'exists');
  assert.is(await ctx.store.countAfter!(first.position, 1000), 3);
  assert.is(await ctx.store.countAfter!(first.position, 2), 2);
  const all = (await ctx.store.readAll({ after: null, limit: 100_000 })).length;
  assert.is(await ctx.store.countAfter!(null, 100_000), all);
});

lag.run();
