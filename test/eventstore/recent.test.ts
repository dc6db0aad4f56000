/**
 * Subscribers of one process share their reads of the log: each event is
 * read from the database once, however many subscribers follow it, and each
 * subscriber still gets every event once, in global order, in batches of its
 * own size, whether it follows live or catches up from far behind.
 */
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore, type Queryable } from '../../domain/eventstore/postgres.js';
import { RecentEvents } from '../../domain/eventstore/recent.js';
import type { Subscription } from '../../domain/eventstore/port.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from './contract.js';

interface Ctx {
  pool: pg.Pool;
}

const recent = suite<Ctx>('subscribers share their reads of the log');

recent.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
});
recent.after(async (ctx) => {
  await ctx.pool.end();
});

/** The store's read of the global order (`readAll`), as it reaches the database. */
const READ_OF_LOG = /FROM es\.events\s+WHERE \(transaction_id, global_position\) >/;

/**
 * The pool, counting the reads of the global order that go through it, and
 * among them the reads held back: those that found nothing although an
 * append through this pool had committed after where they read from. The
 * store reads nothing past the oldest transaction in flight on the whole
 * server, so other databases' transactions (other test files) can hold a
 * read back for a while; the subscribers then read again after a short wait.
 */
function counting(pool: pg.Pool): { db: Queryable; reads: () => number; heldBack: () => number } {
  let reads = 0;
  let heldBack = 0;
  let committed = 0n;
  const db = {
    query: (async (text: unknown, values?: unknown[]) => {
      const sql = typeof text === 'string' ? text : (text as { text: string }).text;
      const args = (typeof text === 'string' ? values : (text as { values?: unknown[] }).values) ?? [];
      const read = READ_OF_LOG.test(sql) && !/count\(\*\)/.test(sql);
      const result = await pool.query(text as string, values);
      if (read) {
        reads++;
        if (result.rows.length === 0 && BigInt(args[0] as string) < committed) heldBack++;
      }
      const tx = /INSERT INTO es\.events/.test(sql) ? (result.rows[0] as { tx?: string } | undefined)?.tx : undefined;
      if (tx && BigInt(tx) > committed) committed = BigInt(tx);
      return result;
    }) as unknown as pg.Pool['query'],
  };
  return { db, reads: () => reads, heldBack: () => heldBack };
}

recent('given three subscribers following live, when events are stored append by append, then each handles every one in order, and the log is read about twice per append, not twice per subscriber', async (ctx) => {
  const { db, reads, heldBack } = counting(ctx.pool);
  // No polling during the test: only this process's appends wake the subscribers.
  const store = createPostgresStore(db, { pollMs: 60_000 });
  const stream = streamName('shared');
  await store.append(stream, [newEvent('Before')], 'no_stream');
  const seen: string[][] = [[], [], []];
  const subscriptions: Subscription[] = seen.map((ids, i) =>
    store.subscribe({ after: null, batchSize: 2 + i }, async (batch) => {
      for (const e of batch) if (e.streamId === stream) ids.push(e.type);
    }),
  );
  await waitUntil(() => seen.every((ids) => ids.length === 1), 'every subscriber handled the first event');
  const before = reads();
  const heldBefore = heldBack();
  const appends = 8;
  const expected = ['Before'];
  for (let a = 0; a < appends; a++) {
    const types = [`A${a}x`, `A${a}y`, `A${a}z`];
    expected.push(...types);
    await store.append(stream, types.map((t) => newEvent(t)), 'exists');
    await waitUntil(() => seen.every((ids) => ids.length === expected.length), 'every subscriber handled the append');
  }
  await Promise.all(subscriptions.map((s) => s.stop()));
  for (const ids of seen) assert.equal(ids, expected);
  const during = reads() - before;
  const held = heldBack() - heldBefore;
  // Each subscriber alone reads at least twice per append (the new events, then none); three read 6 × 8.
  assert.ok(during - held <= 2 * appends + 2, `the log was read ${during} times (${held} held back) for ${appends} appends and 3 subscribers`);
});

recent('given a transaction in flight that began before an append, when it ends after the append, then subscribers that never poll still get the event soon after, each read of the log shared', async (ctx) => {
  const { db, reads } = counting(ctx.pool);
  const store = createPostgresStore(db, { pollMs: 60_000 });
  const stream = streamName('held');
  await store.append(stream, [newEvent('Before')], 'no_stream');
  const seen: string[][] = [[], []];
  const subscriptions = seen.map((ids) =>
    store.subscribe({ after: null }, async (batch) => {
      for (const e of batch) if (e.streamId === stream) ids.push(e.type);
    }),
  );
  await waitUntil(() => seen.every((ids) => ids.length === 1), 'every subscriber handled the first event');
  // An older transaction with an id: nothing committed after it began is readable until it ends.
  const older = await ctx.pool.connect();
  try {
    await older.query('BEGIN');
    await older.query('SELECT pg_current_xact_id()');
    const readsBefore = reads();
    await store.append(stream, [newEvent('Held')], 'exists');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(seen, [['Before'], ['Before']], 'the event is out of reach while the older transaction runs');
    const heldReads = reads() - readsBefore;
    // A read after a wait that doubles up to 100 ms, shared by both subscribers: about 9 in 300 ms, not one per subscriber per millisecond.
    assert.ok(heldReads >= 2 && heldReads <= 12, `${heldReads} reads while held back`);
    await older.query('COMMIT');
  } finally {
    // Closed rather than returned to the pool, so a failure above cannot leave the transaction open for the tests after it.
    older.release(true);
  }
  // Well within the wait of 10 s, against the poll of 60 s.
  await waitUntil(() => seen.every((ids) => ids.length === 2), 'every subscriber handled the held event');
  await Promise.all(subscriptions.map((s) => s.stop()));
  assert.equal(seen, [['Before', 'Held'], ['Before', 'Held']]);
});

recent('given a subscriber that never polls, when it is stopped while its read of the log is under way, then it stops once the read returns, without sleeping out its poll', async (ctx) => {
  let gate: (() => void) | null = null;
  let reading = false;
  const db = {
    query: (async (text: unknown, values?: unknown[]) => {
      const sql = typeof text === 'string' ? text : (text as { text: string }).text;
      if (gate === null && READ_OF_LOG.test(sql)) {
        reading = true;
        await new Promise<void>((resolve) => (gate = resolve));
      }
      return ctx.pool.query(text as string, values);
    }) as unknown as pg.Pool['query'],
  };
  const store = createPostgresStore(db, { pollMs: 60_000 });
  // From the end of the log, so the read finds nothing and the subscriber would go on to wait for the next poll.
  const end = (await createPostgresStore(ctx.pool).readAll({ after: null, limit: 100_000 })).at(-1)?.position ?? null;
  const subscription = store.subscribe({ after: end }, async () => {});
  await waitUntil(() => reading, 'the subscriber is reading the log');
  const stopping = subscription.stop();
  gate!();
  const stopped = await Promise.race([stopping.then(() => true), new Promise<false>((resolve) => setTimeout(() => resolve(false), 5_000))]);
  assert.ok(stopped, 'stop() returned within 5 s, against a poll of 60 s');
});

recent('given a window of at most 5 events, when a subscriber catches up from the start of 30 events while another follows the head, then both get all 30 in order, the one behind reading the store itself', async (ctx) => {
  const store = createPostgresStore(ctx.pool);
  const stream = streamName('window');
  await store.append(stream, Array.from({ length: 30 }, (_, i) => newEvent(`E${i}`)), 'no_stream');
  const all = (await store.readAll({ after: null, limit: 100_000 })).filter((e) => e.streamId === stream);
  let reads = 0;
  const window = new RecentEvents(
    (after, limit) => {
      reads++;
      return store.readAll({ after, limit });
    },
    5,
    4,
  );
  /** Follows from `after` in batches of `size` until it has handled the last event of the stream. */
  async function follow(after: RecordedEvent['position'] | null, size: number): Promise<string[]> {
    const got: string[] = [];
    let at = after;
    for (let guard = 0; guard < 1_000 && got[got.length - 1] !== 'E29'; guard++) {
      const batch = await window.next(at, size);
      if (batch.length === 0) continue;
      for (const e of batch) if (e.streamId === stream) got.push(e.type);
      at = batch[batch.length - 1]!.position;
    }
    return got;
  }
  const head = await follow(all[19]!.position, 3);
  assert.equal(head, all.slice(20).map((e) => e.type));
  const readsByHead = reads;
  // The window now holds at most the last 5; the subscriber from the start reads the store until it reaches them.
  const behind = await follow(null, 7);
  assert.equal(behind, all.map((e) => e.type));
  assert.ok(reads > readsByHead, 'the subscriber behind the window read the store');
});

recent('given a subscriber, when its handler tries to change an event it was handed, then that fails and no other subscriber sees a change', async (ctx) => {
  const store = createPostgresStore(ctx.pool, { pollMs: 10 });
  const stream = streamName('frozen');
  await store.append(stream, [newEvent('Reported', { value: 1 })], 'no_stream');
  const failures: unknown[] = [];
  const values: unknown[] = [];
  const changer = store.subscribe({ after: null, onError: (error) => failures.push(error) }, async (batch) => {
    for (const e of batch) if (e.streamId === stream) (e.data as { value: number }).value = 2;
  });
  await waitUntil(() => failures.length > 0, 'the change failed');
  await changer.stop();
  const reader = store.subscribe({ after: null }, async (batch) => {
    for (const e of batch) if (e.streamId === stream) values.push((e.data as { value: number }).value);
  });
  await waitUntil(() => values.length > 0, 'the reader got the event');
  await reader.stop();
  assert.instance(failures[0], TypeError);
  assert.equal(values, [1]);
});

recent.run();
