import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { ProjectionRunner, type Projection } from '../../projections/runner.js';
import { NodeIndexes } from '../../projections/indexes.js';
import { Leases } from '../../domain/eventstore/leases.js';
import { loadCheckpoint } from '../../domain/eventstore/subscriber.js';

/**
 * `ProjectionRunner.sync` on a node that does not lead: a write answered
 * elsewhere (here, by a platform whose read models include it) is in this
 * node's in-memory indexes once `sync` resolves, and not before. The node's
 * index is held at a gate, so the test sees the wait, not a race.
 */
const sync = suite<{ t: TestPlatform }>('a node of a cluster syncs its indexes with the stored checkpoint');
const log = pino({ level: 'silent' });

sync.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
sync.after(async (ctx) => {
  await ctx.t.stop();
});

sync('given a node whose index is held back, when a write is answered elsewhere, then sync waits until the index has it, and then returns at once', async ({ t }) => {
  const { db, store } = t.platform.deps;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const seen = new Set<string>();
  const held: Projection = {
    name: 'held',
    tables: [],
    async apply(_tx, batch) {
      await gate;
      for (const event of batch) seen.add(event.type);
    },
  };
  const indexes = new NodeIndexes(store, db, [held], log);
  await indexes.start(await loadCheckpoint(db, 'read-models'));
  // This node's runner, standing by: it never starts, and another process leads the read models.
  const node = new ProjectionRunner(store, db, [], log, 'read-models', { leases: new Leases({ url: 'postgres://unused', db, node: 'follower', log }), indexes });
  try {
    // Nothing written since the index started: nothing to wait for.
    await node.sync(1_000);

    // When a write is answered by the leader, whose read models include it.
    const created = await t.call('POST', '/api/users', { body: { username: 'synced-reader' } });
    assert.is(created.status, 201, created.text);

    // Then sync waits while the index is held back, and times out as a write's wait does.
    let synced = false;
    const waiting = node.sync(5_000).then(() => (synced = true));
    await new Promise((r) => setTimeout(r, 300));
    assert.not.ok(synced, 'sync returned before the index had the write');
    const late = await node.sync(100).then(() => null, (error: Error) => error);
    assert.ok(late, 'a sync whose wait runs out fails');
    assert.match(late!.message, /not caught up/);

    // When the index goes on, then sync returns, and the index has the write.
    open();
    await waiting;
    assert.ok(seen.has('UserCreated'), [...seen].join(', '));
    // A node already caught up reads the checkpoint and returns without waiting: a wait of 0 ms would fail.
    const again = await node.sync(0).then(() => null, (error: Error) => error);
    assert.is(again, null, 'a node already caught up returns without waiting for its index');
  } finally {
    open();
    await indexes.stop();
  }
});

sync.run();
