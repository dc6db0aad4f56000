/**
 * The PostgreSQL store's global order under transactions that commit out of
 * sequence order. Writers here append through the adapter itself, on a client
 * inside an explicit transaction, so they can hold the transaction open.
 */
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { comparePositions, type RecordedEvent } from '../../domain/shared/events.js';
import { createTestDatabase } from '../support/cluster.js';
import { newEvent, streamName, waitUntil } from './contract.js';

const test = suite<{ pool: pg.Pool; store: EventStore }>('PostgreSQL global order with late commits');

test.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 12 });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 10 });
});
test.after(async (ctx) => {
  await ctx.pool.end();
});

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ids = (events: { id: string }[]) => events.map((e) => e.id);

function collect(store: EventStore, after: RecordedEvent['position'] | null) {
  const seen: RecordedEvent[] = [];
  const subscription = store.subscribe({ after, batchSize: 50 }, async (batch) => {
    seen.push(...batch);
  });
  return { seen, subscription };
}

for (const when of ['before', 'after'] as const) {
  test(`given a subscriber started ${when} the writes, when an open transaction holds the lower sequence and a later one commits first, then nothing is delivered until it commits, and then both in order`, async ({ pool, store }) => {
    const start = await store.append(streamName('late-start'), [newEvent()], 'no_stream');
    let reader = when === 'before' ? collect(store, start.position) : null;

    const a = newEvent('A');
    const b = newEvent('B');
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const held = await createPostgresStore(client).append(streamName('late-a'), [a], 'no_stream');
      const committed = await store.append(streamName('late-b'), [b], 'no_stream');
      assert.ok(held.position.prepare < committed.position.prepare, 'A took the lower sequence number');

      reader ??= collect(store, start.position);
      // B is committed, but delivering it now would put the subscriber's checkpoint past A.
      await pause(300);
      assert.equal(await store.readAll({ after: start.position, limit: 10 }), []);
      assert.equal(reader.seen, []);

      await client.query('COMMIT');
    } finally {
      client.release();
    }
    await waitUntil(() => reader!.seen.length >= 2, 'both events were delivered');
    await pause(50);
    await reader.subscription.stop();
    assert.equal(ids(reader.seen), [a.id, b.id]);
  });
}

test('when eight writers commit randomly delayed transactions while a subscriber reads, then it sees every committed event exactly once and no rolled-back one', async ({ pool, store }) => {
  const start = await store.append(streamName('stress-start'), [newEvent()], 'no_stream');
  const reader = collect(store, start.position);
  const committed: string[] = [];
  const rolledBack: string[] = [];

  await Promise.all(
    Array.from({ length: 8 }, async (_, w) => {
      const client = await pool.connect();
      const tx = createPostgresStore(client);
      const revisions = new Map<string, number>();
      try {
        for (let i = 0; i < 30; i++) {
          const stream = `stress-${w}-${i % 3}`;
          const events = Array.from({ length: 1 + Math.floor(Math.random() * 3) }, () => newEvent('Stressed', { w, i }));
          await client.query('BEGIN');
          const expected = revisions.get(stream) ?? 'no_stream';
          const result = await tx.append(stream, events, expected);
          if (Math.random() < 0.5) await client.query('SELECT pg_sleep($1)', [Math.random() * 0.015]);
          else await pause(Math.random() * 15);
          if (Math.random() < 0.1) {
            await client.query('ROLLBACK');
            rolledBack.push(...ids(events));
          } else {
            await client.query('COMMIT');
            committed.push(...ids(events));
            revisions.set(stream, result.nextRevision);
          }
        }
      } catch (error) {
        await client.query('ROLLBACK');
        throw error;
      } finally {
        client.release();
      }
    }),
  );

  await waitUntil(() => reader.seen.length >= committed.length, 'every committed event was delivered');
  await pause(100);
  await reader.subscription.stop();

  const seen = ids(reader.seen);
  assert.is(seen.length, new Set(seen).size, 'no event was delivered twice');
  assert.equal([...seen].sort(), [...committed].sort(), 'exactly the committed events were delivered');
  assert.ok(!rolledBack.some((id) => seen.includes(id)), 'no rolled-back event was delivered');
  for (let i = 1; i < reader.seen.length; i++) {
    assert.ok(comparePositions(reader.seen[i - 1]!.position, reader.seen[i]!.position) < 0, 'delivery follows the global order');
  }
  assert.equal(seen, ids(await store.readAll({ after: start.position, limit: 10_000 })), 'delivery matches a later full read');

  // The run proves something only if transactions did commit out of sequence order.
  const commitRank = new Map(committed.map((id, i) => [id, i]));
  const bySequence = [...reader.seen].sort((x, y) => (x.position.prepare < y.position.prepare ? -1 : 1));
  const ranks = bySequence.map((e) => commitRank.get(e.id)!);
  assert.ok(
    ranks.some((r, i) => i > 0 && r < ranks[i - 1]!),
    'some transaction committed before one holding a lower sequence number',
  );
});

test.run();
