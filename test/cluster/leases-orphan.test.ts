/**
 * A leader that vanishes in the middle of a batch: its leadership connection
 * is found dead and its lock released, while the batch transaction that
 * share-locks the lease row (`Fence.hold`) stays open on a connection the
 * server still believes in. The next leader must not wait for that
 * transaction for ever: once a raise of the epoch failed on it, the node that
 * holds the lock ends it.
 */
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Leases } from '../../domain/eventstore/leases.js';
import { IDLE_IN_TRANSACTION_MS, openPool } from '../../api/platform.js';
import { createTestDatabase } from '../support/cluster.js';
import { until } from '../support/nodes.js';

const PART = 'read-models';
const KEY = `platform-lease:${PART}`;

const test = suite('cluster: a leader that vanished mid-batch');

test('given node A leading with a batch transaction open, when its lock connection dies and the batch\'s client is never heard of again, then node B leads within the documented bound and A\'s transaction is ended', async () => {
  const url = await createTestDatabase();
  const log = pino({ level: 'silent' });
  const pool = openPool(url, 4, log, 'platform node-b');
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  // Node A, as its lock connection and one connection of its pool would be: the lock taken, the epoch raised,
  // and a batch transaction holding the lease row.
  const lockA = new pg.Client({ connectionString: url, application_name: 'platform leases node-a' });
  const batchA = new pg.Client({ connectionString: url, application_name: 'platform node-a' });
  for (const c of [lockA, batchA]) c.on('error', () => undefined);
  await lockA.connect();
  await batchA.connect();
  await lockA.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [KEY]);
  const { rows } = await lockA.query<{ epoch: string }>(`INSERT INTO es.leases (name, holder, epoch) VALUES ($1, 'node-a', 1) RETURNING epoch::text AS epoch`, [PART]);
  await batchA.query('BEGIN');
  await batchA.query('SELECT 1 FROM es.leases WHERE name = $1 AND epoch = $2::bigint FOR SHARE', [PART, rows[0]!.epoch]);

  let ledAt = 0;
  const leasesB = new Leases({ url, db, node: 'node-b', log, retryMs: 500 });
  leasesB.register(PART, { lead: async () => void (ledAt = Date.now()), standDown: async () => undefined });
  try {
    await leasesB.start();
    await new Promise((r) => setTimeout(r, 700));
    assert.is(ledAt, 0, 'B stands by while A holds the lock');

    // When the server finds A's lock connection dead (what its TCP keepalives do for a machine that vanished).
    const diedAt = Date.now();
    await sql`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'platform leases node-a'`.execute(db);

    // Then B leads within the bound: a raise waits 5 s for the row, fails, and the next one ends A's idle transaction.
    await until(() => ledAt > 0, 15_000, 'node B to lead');
    assert.ok(ledAt - diedAt < 15_000, `B led ${ledAt - diedAt} ms after A's lock connection died`);
    const lease = await sql<{ holder: string; epoch: string }>`SELECT holder, epoch::text AS epoch FROM es.leases WHERE name = ${PART}`.execute(db);
    assert.equal(lease.rows, [{ holder: 'node-b', epoch: '2' }]);
    const orphan = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'platform node-a'`.execute(db);
    assert.is(orphan.rows[0]!.n, 0, 'A\'s batch transaction was ended');
    const commit = await batchA.query('COMMIT').then(() => 'committed', (err: Error) => err.message);
    assert.is.not(commit, 'committed', 'A\'s batch can no longer commit');
  } finally {
    await leasesB.stop();
    await lockA.end().catch(() => undefined);
    await batchA.end().catch(() => undefined);
    await db.destroy();
  }
});

test('given the platform\'s pool, then each connection is named after the node and ends a transaction left idle, and an options parameter of the URL adds to its settings', async () => {
  const url = new URL(await createTestDatabase());
  url.searchParams.set('options', '-c statement_timeout=12345');
  const pool = openPool(url.toString(), 1, pino({ level: 'silent' }), 'platform node-c');
  try {
    const { rows } = await pool.query(`SELECT current_setting('application_name') AS name, current_setting('idle_in_transaction_session_timeout') AS idle,
      current_setting('jit') AS jit, current_setting('statement_timeout') AS statement`);
    assert.equal(rows[0], { name: 'platform node-c', idle: `${IDLE_IN_TRANSACTION_MS / 1000}s`, jit: 'off', statement: '12345ms' });
  } finally {
    await pool.end();
  }
});

test.run();
