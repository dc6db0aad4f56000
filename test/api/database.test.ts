/**
 * What the platform sets on its own database connections, and on the
 * PostgreSQL server it runs itself.
 */
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { readFileSync } from 'node:fs';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { MALLOC_TUNABLES, serverEnvironment } from '../../migrations/cluster.js';

const test = suite<{ t: TestPlatform }>('database connections');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform({ logLevel: 'silent' });
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

/** The store's read of several streams, as `readStreams` sends it, with the plan as run. */
const EXPLAIN_READ_STREAMS = `EXPLAIN (ANALYZE, FORMAT JSON) SELECT e.* FROM unnest(ARRAY['device-a', 'device-b']) WITH ORDINALITY AS s(id, n)
  CROSS JOIN LATERAL (SELECT event_id, type, data, metadata, revision FROM es.events WHERE stream_id = s.id ORDER BY revision) AS e
  ORDER BY s.n, e.revision`;

/** Whether that read, costed above any JIT threshold, compiles code on the given connection. */
const compiled = (plan: { 'QUERY PLAN': Record<string, unknown>[] }) => 'JIT' in plan['QUERY PLAN'][0]!;

async function compilesOnPlatform(db: Kysely<any>): Promise<boolean> {
  return db.transaction().execute(async (tx) => {
    await sql`SET LOCAL jit_above_cost = 0`.execute(tx);
    const { rows } = await sql.raw<{ 'QUERY PLAN': Record<string, unknown>[] }>(EXPLAIN_READ_STREAMS).execute(tx);
    return compiled(rows[0]!);
  });
}

async function compilesWithServerDefaults(url: string): Promise<boolean> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL jit_above_cost = 0');
    const { rows } = await client.query(EXPLAIN_READ_STREAMS);
    return compiled(rows[0]);
  } finally {
    await client.end();
  }
}

test("given the platform's connections, when a statement is costed above JIT compilation's threshold, then it runs without compiling", async ({ t }) => {
  assert.is(await compilesOnPlatform(t.platform.deps.db), false, "the platform's connection does not compile");
  const available = await sql<{ on: boolean }>`SELECT pg_jit_available() AS on`.execute(t.platform.deps.db);
  if (available.rows[0]!.on) {
    // The check above can fail: the same statement compiles on a connection with the server's defaults.
    assert.is(await compilesWithServerDefaults(t.platform.deps.config.databaseUrl!), true, "a connection with the server's defaults compiles");
  }
});

test('given the private cluster, when a backend runs the same large statement again, then it reuses the memory it freed instead of faulting it in anew', async ({ t }) => {
  // The test run's cluster is a private cluster (test/support/cluster.ts), started as the platform starts its own.
  // A 2 MB JSON parameter: glibc's defaults map and unmap it for every statement, about 2,000 page faults each.
  const doc = JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ i, s: 'x'.repeat(80) })));
  const client = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await client.connect();
  try {
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const faults = () => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[7]);
    const run = () => client.query('SELECT count(*) FROM jsonb_array_elements($1::jsonb)', [doc]);
    for (let i = 0; i < 3; i++) await run();
    const before = faults();
    for (let i = 0; i < 10; i++) await run();
    const perStatement = (faults() - before) / 10;
    assert.ok(perStatement < 100, `${perStatement} minor page faults per statement`);
  } finally {
    await client.end();
  }
});

test("given the operator's own GLIBC_TUNABLES, when the server's environment is made, then theirs are kept and win over the platform's", () => {
  const env = serverEnvironment({ PATH: '/usr/bin', GLIBC_TUNABLES: 'glibc.malloc.trim_threshold=1048576:glibc.cpu.hwcaps=-AVX512F' });
  assert.is(env.PATH, '/usr/bin');
  assert.equal(env.GLIBC_TUNABLES!.split(':'), ['glibc.malloc.trim_threshold=1048576', 'glibc.cpu.hwcaps=-AVX512F', 'glibc.malloc.mmap_threshold=16777216']);
  assert.equal(serverEnvironment({}).GLIBC_TUNABLES!.split(':'), MALLOC_TUNABLES);
});

test.run();
