/**
 * A node takes each part once. A part is tried as it registers and at every
 * heartbeat, and PostgreSQL's advisory locks are re-entrant on one session,
 * so a registration and a heartbeat that both find a part free could both
 * take it: the part would run twice on the node (two subscriptions, every
 * side effect twice), and a stop would release the lock once, keeping the
 * part from every other node.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Leases } from '../../domain/eventstore/leases.js';
import { openPool } from '../../api/platform.js';
import { createTestDatabase } from '../support/cluster.js';
import { until } from '../support/nodes.js';

const PARTS = 60;

const test = suite('cluster: a part taken once');

test('given a node whose heartbeat runs all the time, when parts register meanwhile, then each is led once at epoch 1, and once given up another node takes it', async () => {
  const url = await createTestDatabase();
  const log = pino({ level: 'silent' });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: openPool(url, 4, log) }) });
  const leads = new Map<string, number>();
  // A heartbeat every millisecond or so: every registration meets one on its way.
  const a = new Leases({ url, db, node: 'node-a', log, retryMs: 1 });
  const b = new Leases({ url, db, node: 'node-b', log, retryMs: 50 });
  try {
    await a.start();
    const parts = Array.from({ length: PARTS }, (_, i) => `part-${i}`);
    for (const part of parts) {
      a.register(part, { lead: async () => void leads.set(part, (leads.get(part) ?? 0) + 1), standDown: async () => undefined });
      await new Promise((r) => setTimeout(r, 2));
    }
    await until(() => parts.every((p) => a.leads(p)), 5_000, 'node A to lead every part');
    await new Promise((r) => setTimeout(r, 300));

    const twice = parts.filter((p) => leads.get(p) !== 1);
    assert.equal(twice, [], 'every part led once');
    const { rows } = await sql<{ name: string }>`SELECT name FROM es.leases WHERE epoch <> 1 ORDER BY name`.execute(db);
    assert.equal(rows.map((r) => r.name), [], 'every epoch raised once');

    // When node A gives a part up, its lock is free: node B takes it.
    let bLeads = false;
    b.register(parts[0]!, { lead: async () => void (bLeads = true), standDown: async () => undefined });
    await b.start();
    await a.unregister(parts[0]!);
    await until(() => bLeads, 3_000, 'node B to take the part A gave up');
  } finally {
    await b.stop();
    await a.stop();
    await db.destroy();
  }
});

test.run();
