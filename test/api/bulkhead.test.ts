import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, eventually, givenProvider, publish } from '../ingest/support.js';
import { givenUser } from '../users/given.js';

/**
 * HTTP requests read through connections of their own (`HTTP_DATABASE_CONNECTIONS`), each statement bounded in
 * time: slow requests never take the connections devices' data is stored through, a burst of writes queuing for
 * one lock takes one connection, and a request whose query runs too long answers 503.
 */

/**
 * A second session holding the named locks that creating a credentials set or reserving a topic takes, so every
 * such request waits. Session locks, outside any transaction: one left open would hold back the event store's
 * reads, and the read models with them.
 */
async function holdLocks(t: TestPlatform, names: string[]): Promise<pg.Client> {
  const locker = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await locker.connect();
  for (const name of names) await locker.query('SELECT pg_advisory_lock(hashtext($1))', [name]);
  return locker;
}
const SETS = 'credentials-set-usernames';
const TOPICS = 'reserved-topics';

const createSet = (t: TestPlatform, username: string, token = t.adminToken) => t.call('POST', '/api/basic-credentials-sets', { body: { username, password: `${username}-password` }, token });

/** Sessions of the platform's `part` (`http`, `locks`) waiting on `what` (a wait event type), as the server sees them. */
const waiting = async (t: TestPlatform, part: string, what: string) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE ${`platform % ${part}`} AND wait_event_type = ${what}`.execute(t.platform.deps.db)).rows[0]!.n;

/** Settles to the answer, or to 'waiting' if none came within `ms`. */
const answeredWithin = <T>(request: Promise<T>, ms: number) => Promise.race([request, new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms))]);

const bulkhead = suite<{ t: TestPlatform; locker?: pg.Client }>('HTTP requests on database connections of their own');

bulkhead.before(async (ctx) => {
  ctx.t = await startTestPlatform({ httpConnections: 2 });
});
bulkhead.after.each(async (ctx) => {
  await ctx.locker?.end().catch(() => {});
  ctx.locker = undefined;
});
bulkhead.after(async (ctx) => {
  await ctx.t.stop();
});

bulkhead('given a burst of creations waiting on one lock, then they hold one connection between them, apart from the HTTP connections: reads and writes under other locks are served, and every creation answers once the lock goes', async (ctx) => {
  const { t } = ctx;
  const provider = await givenProvider(t, 'burst', []);
  // Given twenty creations of credentials sets waiting on their lock, held elsewhere,
  ctx.locker = await holdLocks(t, [SETS]);
  // (by a user of their own: the admin's read and write below must not wait their turn behind the burst, api/turns.ts)
  const burster = await givenUser(t, 'burster', { attributes: { roles: ['installer'] } });
  const creations = Array.from({ length: 20 }, (_, i) => createSet(t, `burst-${i}`, burster.token));
  await eventually(async () => (await waiting(t, 'locks', 'Lock')) === 1, 10_000, 'one connection to wait on the lock');
  // when a read and a write under another lock come, both are served;
  const read = await t.call('GET', '/api/dashboards');
  assert.is(read.status, 200, read.text);
  const reserved = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/generic/v2/burst/one', basicCredentialsSetId: provider.setId } });
  assert.is(reserved.status, 201, reserved.text);
  assert.is(await waiting(t, 'locks', 'Lock'), 1, 'the burst still waits on one connection');
  // and once the lock goes, every creation is made, one after the other.
  await ctx.locker.end();
  const answers = await Promise.all(creations);
  assert.equal(answers.map((a) => a.status), Array(20).fill(201), answers.map((a) => a.text).join('\n'));
  const sets = await t.call('GET', '/api/basic-credentials-sets', { token: burster.token });
  assert.is(sets.body.filter((s: { username: string }) => s.username.startsWith('burst-')).length, 20);
});

bulkhead('given every HTTP connection busy with a slow read, when a device publishes, then its message is stored, acknowledged and projected; the reads answer after', async (ctx) => {
  const { t } = ctx;
  const topic = 'svc/generic/v2/plant/meter';
  const provider = await givenProvider(t, 'plant', [topic]);
  const device = await connectMqtt(t, provider.username, provider.password);
  // Given reads of dashboards that take seconds each (the table behind a view that sleeps), more than the HTTP front has connections,
  const created = await t.call('POST', '/api/dashboards', { body: { name: 'Plant' } });
  assert.is(created.status, 201, created.text);
  const db = t.platform.deps.db;
  await sql`ALTER TABLE dashboards RENAME TO dashboards_kept`.execute(db);
  await sql`CREATE VIEW dashboards AS SELECT d.* FROM dashboards_kept d, pg_sleep(3)`.execute(db);
  try {
    const reads = Array.from({ length: 3 }, () => t.call('GET', '/api/dashboards'));
    await eventually(async () => (await waiting(t, 'http', 'Timeout')) === 2, 10_000, 'both HTTP connections to be busy');
    // when a device publishes, the broker acknowledges it once stored,
    await publish(device, topic, { energy: 12.5 });
    // then it is in the read models while the reads still run;
    const stored = await eventually(() => db.selectFrom('devices').select('doc').where('secret', '=', topic).executeTakeFirst(), 10_000, 'the device row');
    assert.is((stored.doc as Record<string, unknown>).energy, 12.5);
    assert.is(await waiting(t, 'http', 'Timeout'), 2, 'the reads still hold both HTTP connections');
    // and the reads answer after.
    assert.equal((await Promise.all(reads)).map((r) => [r.status, r.body.length]), [[200, 1], [200, 1], [200, 1]]);
  } finally {
    await sql`DROP VIEW dashboards`.execute(db);
    await sql`ALTER TABLE dashboards_kept RENAME TO dashboards`.execute(db);
  }
  await device.endAsync();
});

bulkhead('when the audit log is read, then the read runs on the HTTP front\'s connections, not on those ingest stores through', async ({ t }) => {
  // Criteria nothing else in the platform reads the log by, so its statement can be told apart.
  const read = await t.call('GET', `/api/audit/events?type=CredentialsSetCreated&actor=someone&from=2020-01-01T00%3A00%3A00Z&limit=5`);
  assert.is(read.status, 200, read.text);
  // A session's last statement stays in pg_stat_activity while it is idle.
  const { rows } = await sql<{ application_name: string }>`SELECT application_name FROM pg_stat_activity
    WHERE query LIKE '%FROM es.events%' AND query LIKE '%type = ANY%' AND query LIKE '%metadata->>''actor''%' AND query LIKE '%metadata->>''time'' >=%'
      AND datname = current_database()`.execute(t.platform.deps.db);
  assert.ok(rows.length > 0, 'the audit read is seen');
  assert.ok(rows.every((r) => / http$/.test(r.application_name)), JSON.stringify(rows));
});

bulkhead.run();

const timeout = suite<{ t: TestPlatform; locker?: pg.Client }>('HTTP requests whose query runs too long');

timeout.before(async (ctx) => {
  ctx.t = await startTestPlatform({ httpStatementTimeoutMs: 300 });
});
timeout.after(async (ctx) => {
  await ctx.locker?.end().catch(() => {});
  await ctx.t.stop();
});

timeout('given a statement that waits past HTTP_STATEMENT_TIMEOUT_MS, when it is stopped, then the request answers 503 with Retry-After, writes nothing, and the next request is served', async (ctx) => {
  const { t } = ctx;
  ctx.locker = await holdLocks(t, [SETS]);
  const slow = await createSet(t, 'late');
  assert.is(slow.status, 503, slow.text);
  assert.match(slow.text, /^Service Unavailable: the request's query ran longer than the platform allows and was stopped; narrow it/);
  assert.is(slow.headers.get('retry-after'), '5');
  assert.ok(t.logs.some((line) => line.code === '57014' && line.level === 40), 'a warning names the stopped statement');
  await ctx.locker.end();
  const sets = await t.call('GET', '/api/basic-credentials-sets');
  assert.equal(sets.body.filter((s: { username: string }) => s.username === 'late'), [], 'nothing was written');
  const again = await createSet(t, 'late');
  assert.is(again.status, 201, again.text);
});

timeout.run();

const lagging = suite<{ t: TestPlatform }>('named locks while the read models lag');

lagging.before(async (ctx) => {
  // Every write's wait for the read models runs out at once: each answers 503, its change stored.
  ctx.t = await startTestPlatform({ projectionWaitMs: 1 });
});
lagging.after(async (ctx) => {
  await ctx.t.stop();
});

lagging('given a creation answered before the read models hold it, when the same username is asked for at once, then the second is refused: the first holds the lock until its set is in the read models', async ({ t }) => {
  const answers = await Promise.all([createSet(t, 'twin'), createSet(t, 'twin')]);
  const told = answers.map((a) => `${a.status} ${a.text}`).join('\n');
  const refused = answers.filter((a) => a.status === 409);
  assert.is(refused.length, 1, told);
  assert.is(refused[0]!.text, 'ERR - username is already used by another basic credentials set');
  assert.ok(answers.some((a) => a.status === 201 || a.status === 503), told);
  const twins = await eventually(async () => {
    const sets = await t.call('GET', '/api/basic-credentials-sets');
    return sets.status === 200 ? (sets.body as { username: string }[]).filter((s) => s.username === 'twin') : undefined;
  }, 10_000, 'the sets');
  assert.is(twins.length, 1);
});

lagging('given the read models held back, when a creation is stored but not yet in them, then it answers 503 at once and keeps the lock: the same username asked for meanwhile waits, and is refused once they hold the first', async ({ t }) => {
  // A transaction with an id, left open, holds back every read of the event log after it, and the read models with them.
  const blocker = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await blocker.connect();
  try {
    await blocker.query('BEGIN');
    await blocker.query('SELECT pg_current_xact_id()');
    const first = await answeredWithin(createSet(t, 'held'), 5_000);
    assert.ok(first !== 'waiting', 'the first creation is answered while the read models are held back');
    assert.is(first.status, 503, first.text);
    const second = createSet(t, 'held');
    assert.is(await answeredWithin(second, 300), 'waiting', 'the second waits for the lock the first keeps');
    await blocker.query('COMMIT');
    const refused = await second;
    assert.is(refused.status, 409, refused.text);
  } finally {
    await blocker.end();
  }
});

lagging.run();
