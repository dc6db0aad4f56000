import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { createTestDatabase } from '../support/cluster.js';
import { eventually } from '../ingest/support.js';

const health = suite<{ t: TestPlatform }>('health');

health.before(async (ctx) => {
  ctx.t = await startTestPlatform({ logLevel: 'silent' });
});
health.after(async (ctx) => {
  await ctx.t.stop();
});

const SUBSCRIBERS = ['read-models', 'output-mqtt', 'channels-http', 'geofence-tracking', 'commands', 'rules', 'calculations'];

health('given a running platform, when health is asked without a token, then 200 with every part up, each follower of the log among them, caught up', async ({ t }) => {
  const res = await t.call('GET', '/api/health', { token: null });
  assert.is(res.status, 200);
  const { subscribers, ...rest } = res.body;
  assert.equal(rest, { status: 'ok', database: true, eventStore: { kind: 'postgres', up: true }, projections: true, parkedEvents: 0 });
  assert.equal(Object.keys(subscribers).sort(), [...SUBSCRIBERS].sort());
  for (const name of SUBSCRIBERS) assert.equal(subscribers[name], { role: 'leading', up: true, lag: { events: 0, seconds: 0 } }, name);
});

health('given the projections have stopped, when health is asked, then 503 starting', async ({ t }) => {
  await t.platform.deps.projections.stop();
  const res = await t.call('GET', '/api/health', { token: null });
  assert.is(res.status, 503);
  assert.is(res.body.status, 'starting');
  assert.is(res.body.projections, false);
  assert.is(res.body.database, true);
});

health.run();

// ---------------------------------------------------------------------------

const held = suite<{ t: TestPlatform }>('health: what holds the followers of the log back');

/** The bounds of health, and the wait of a write for the read models, shorter than production's (`STALLED_MS` 10 s, `HELD_BACK_SECONDS` 5, `PROJECTION_WAIT_MS` 5 s). */
const STALLED_MS = 1000;
const HELD_BACK_SECONDS = 2;
const PROJECTION_WAIT_MS = 2000;

held.before(async (ctx) => {
  ctx.t = await startTestPlatform({ projectionWaitMs: PROJECTION_WAIT_MS }, { stalledMs: STALLED_MS, heldBackSeconds: HELD_BACK_SECONDS, horizonCheckMs: 250 });
});
held.after(async (ctx) => {
  await ctx.t.stop();
});

held('given the projection runner\'s batch held at its gate, when it has waited past the stall bound, then health names the read models as not up, why, and how far behind they are', async ({ t }) => {
  // The gate a rebuild's swap closes, taken and kept by another session (an advisory lock: no transaction holds the store's reads back).
  const gate = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await gate.connect();
  try {
    await gate.query(`SELECT pg_advisory_lock(hashtextextended('platform-read-model-swap', 0))`);
    // A write whose batch the runner cannot apply while the gate is closed (it answers 503 once PROJECTION_WAIT_MS is out).
    const write = t.call('POST', '/api/dashboards', { body: { name: 'stalled' } });
    const res = await eventually(async () => {
      const answer = await t.call('GET', '/api/health', { token: null });
      return answer.body.subscribers['read-models'].up === false ? answer : undefined;
    }, 10_000, 'health to say the read models are not up');
    const models = res.body.subscribers['read-models'];
    assert.is(models.up, false, JSON.stringify(models));
    assert.match(models.why, /^a batch has been under way for \d+ s$/);
    assert.ok(models.lag.events >= 1 && models.lag.seconds >= STALLED_MS / 1000, JSON.stringify(models));
    assert.is(res.body.projections, true, 'the runner has not failed: it waits');
    await gate.query(`SELECT pg_advisory_unlock(hashtextextended('platform-read-model-swap', 0))`);
    await write;
    await eventually(async () => (await t.call('GET', '/api/health', { token: null })).body.subscribers['read-models'].up === true, 5_000, 'the read models to be up again');
  } finally {
    await gate.end();
  }
});

held('given a write transaction left open in another database of the same PostgreSQL server, when it has been open a few seconds, then health and the log name it as what holds the store\'s reads back, and say when it ended', async ({ t }) => {
  const other = await createTestDatabase();
  const name = new URL(other).pathname.slice(1);
  const client = new pg.Client({ connectionString: other, application_name: 'a nightly job' });
  await client.connect();
  try {
    await client.query('BEGIN');
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_current_xact_id()');
    // An event stored meanwhile is out of every follower's reach until that transaction ends.
    const write = t.call('POST', '/api/dashboards', { body: { name: 'held back' } });
    const holder = await eventually(async () => (await t.call('GET', '/api/health', { token: null })).body.eventStore.readsHeldBackBy, 10_000, 'health to name the transaction');
    assert.is(holder.pid, rows[0]!.pid, JSON.stringify(holder));
    assert.is(holder.database, name);
    assert.is(holder.application, 'a nightly job');
    assert.is(holder.state, 'idle in transaction');
    assert.ok(holder.seconds >= HELD_BACK_SECONDS, JSON.stringify(holder));
    const told = await eventually(async () => t.logs.find((l) => String(l.msg).includes('reads are held back by a transaction left open')), 10_000, 'the log to name the transaction');
    assert.is((told.holder as { pid: number }).pid, rows[0]!.pid);
    // Held back past PROJECTION_WAIT_MS, the write is answered 503 with its change stored,
    assert.is((await write).status, 503);

    await client.query('COMMIT');
    // and once the transaction ends, the read models have it.
    await eventually(async () => (await t.call('GET', '/api/dashboards')).text.includes('held back'), 5_000, 'the read models to have the write');
    assert.is((await t.call('GET', '/api/health', { token: null })).body.eventStore.readsHeldBackBy, undefined);
    await eventually(async () => t.logs.some((l) => String(l.msg).includes('the transaction that held them back has ended')), 10_000, 'the log to say the reads go on');
  } finally {
    await client.end();
  }
});

held.run();
