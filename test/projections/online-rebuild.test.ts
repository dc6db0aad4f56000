/**
 * Rebuilding read models while the platform serves: devices publish over
 * MQTT, clients write and read over REST, and a rebuild of every read model,
 * then of one by name (through the command), swaps new tables in under them.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { sql, type Kysely } from 'kysely';
import type { MqttClient } from 'mqtt';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Database } from '../../projections/database.js';
import { allProjections } from '../../projections/index.js';
import { rebuild, readModelNames, RebuildBusyError } from '../../projections/rebuild.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { connectMqtt, givenProvider, projected, publish } from '../ingest/support.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const TOPIC = 'svc/generic/v2/rebuild/meter';
const silent = pino({ level: 'silent' });

interface Traffic {
  /** Every REST answer's status, with what was asked. */
  answers: { what: string; status: number; text: string }[];
  dashboards: string[];
  /** The `seq` values the broker acknowledged. */
  published: number[];
  stop(): Promise<void>;
}

/** Publishes, writes and reads in three loops until stopped. */
function startTraffic(t: TestPlatform, client: MqttClient, deviceId: string, label: string): Traffic {
  const traffic: Traffic = { answers: [], dashboards: [], published: [], stop: async () => {} };
  let running = true;
  let seq = 0;
  const publisher = (async () => {
    while (running) {
      const n = ++seq;
      await publish(client, TOPIC, { seq: n, label });
      traffic.published.push(n);
    }
  })();
  const writer = (async () => {
    for (let i = 0; running; i++) {
      const res = await t.call('POST', '/api/dashboards', { body: { name: `${label} ${i}` } });
      traffic.answers.push({ what: 'POST /api/dashboards', status: res.status, text: res.text });
      if (res.status === 201) traffic.dashboards.push(res.body._id);
    }
  })();
  const reader = (async () => {
    while (running) {
      for (const path of ['/api/dashboards', `/api/iotnodes/${deviceId}`, '/api/users']) {
        const res = await t.call('GET', path);
        traffic.answers.push({ what: `GET ${path}`, status: res.status, text: res.text.slice(0, 300) });
      }
    }
  })();
  traffic.stop = async () => {
    running = false;
    await Promise.all([publisher, writer, reader]);
  };
  return traffic;
}

/** Waits until the traffic has made `n` more REST answers. */
async function moreAnswers(traffic: Traffic, n: number): Promise<void> {
  const target = traffic.answers.length + n;
  while (traffic.answers.length < target) await new Promise((r) => setTimeout(r, 10));
}

const oids = async (db: Kysely<Database>) => {
  const out: Record<string, number> = {};
  for (const table of allProjections().flatMap((p) => p.tables)) out[table] = (await sql<{ oid: number }>`SELECT to_regclass(${table})::oid::int AS oid`.execute(db)).rows[0]!.oid;
  return out;
};

/**
 * The read models as the live runner left them, against the same log
 * replayed from nothing by the plain runner (every table emptied, every event
 * applied), the platform's projections stopped meanwhile.
 */
async function assertEqualToReplay(t: TestPlatform): Promise<void> {
  await projected(t);
  const { db, store } = t.platform.deps;
  const live = await snapshotReadModels(db);
  await t.platform.deps.projections.stop();
  try {
    const replay = new ProjectionRunner(store, db, allProjections(), silent);
    await replay.reset();
    await replay.catchUp();
    const replayed = await snapshotReadModels(db);
    for (const table of Object.keys(live)) assert.equal(live[table], replayed[table], `${table} equals a replay of the log`);
  } finally {
    await t.platform.deps.projections.start();
  }
}

async function assertNothingMissing(t: TestPlatform, traffic: Traffic, deviceId: string, label: string): Promise<void> {
  const failed = traffic.answers.filter((a) => a.status >= 300);
  assert.equal(failed, [], 'no error answer while the rebuild ran');
  for (const id of traffic.dashboards) {
    const res = await t.call('GET', `/api/dashboards/${id}`);
    assert.is(res.status, 200, `dashboard ${id} written during the rebuild reads back`);
  }
  await projected(t);
  const { rows } = await sql<{ seq: number }>`SELECT (h.fields->>'seq')::int AS seq FROM device_history h
    WHERE h.device_id = ${deviceId} AND h.fields ? 'seq' AND h.fields->>'label' = ${label}`.execute(t.platform.deps.db);
  const stored = new Set(rows.map((r) => r.seq));
  const missing = traffic.published.filter((n) => !stored.has(n));
  assert.equal(missing, [], 'every acknowledged publish is in the device history');
}

const online = suite<{ t: TestPlatform; client: MqttClient; deviceId: string }>('rebuild while the platform serves');

online.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const provider = await givenProvider(ctx.t, 'rebuild-meter', [TOPIC]);
  ctx.client = await connectMqtt(ctx.t, provider.username, provider.password);
  // A history worth replaying: a few hundred reports and dashboards before any rebuild.
  for (let i = 0; i < 300; i++) await publish(ctx.client, TOPIC, { seq: -i, label: 'seed' });
  for (let i = 0; i < 20; i++) assert.is((await ctx.t.call('POST', '/api/dashboards', { body: { name: `seed ${i}` } })).status, 201);
  await projected(ctx.t);
  ctx.deviceId = (await ctx.t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', TOPIC).executeTakeFirstOrThrow()).id;
});
online.after(async (ctx) => {
  ctx.client?.end(true);
  await ctx.t?.stop();
});

online('given a view with a grant and a comment over a read model, when every read model is rebuilt under MQTT and REST traffic, then no answer fails, nothing is missing, the new tables equal a replay, and the view reads the new table', async ({ t, client, deviceId }) => {
  const { db, store } = t.platform.deps;
  await sql`CREATE SCHEMA reporting`.execute(db);
  await sql`CREATE VIEW reporting.dashboard_names AS SELECT id, name FROM public.dashboards`.execute(db);
  await sql`CREATE VIEW reporting.dashboard_count AS SELECT count(*)::int AS n FROM reporting.dashboard_names`.execute(db);
  await sql`COMMENT ON VIEW reporting.dashboard_names IS 'names of dashboards'`.execute(db);
  await sql`GRANT SELECT ON reporting.dashboard_names TO PUBLIC`.execute(db);
  const before = await oids(db);

  const traffic = startTraffic(t, client, deviceId, 'full');
  let report: Awaited<ReturnType<typeof rebuild>>;
  try {
    await moreAnswers(traffic, 20);
    const during = traffic.answers.length;
    // Small batches: many transactions, so the traffic interleaves with the replay and with the catching up.
    report = await rebuild(store, db, silent, { batchSize: 50 });
    assert.ok(traffic.answers.length > during, 'REST traffic went on while the rebuild ran');
    await moreAnswers(traffic, 20);
  } finally {
    // Stopped whatever happened, so a failure here leaves no traffic running into the tests after it.
    await traffic.stop();
  }

  assert.is(report.projections.length, allProjections().length, 'every read model was rebuilt');
  assert.ok(report.events > 320, `the log was replayed (${report.events} events)`);
  const after = await oids(db);
  for (const table of Object.keys(before)) assert.is.not(after[table], before[table], `${table} is a new table`);

  await assertNothingMissing(t, traffic, deviceId, 'full');
  await assertEqualToReplay(t);

  const counts = (await sql<{ view: number; table: number; total: number }>`SELECT (SELECT count(*)::int FROM reporting.dashboard_names) AS view,
      (SELECT count(*)::int FROM public.dashboards) AS table, (SELECT n FROM reporting.dashboard_count) AS total`.execute(db)).rows[0]!;
  assert.ok(counts.table > 20, 'dashboards exist');
  assert.is(counts.view, counts.table, 'the view reads the new table, rows written after the swap included');
  assert.is(counts.total, counts.table, 'a view over that view too');
  const meta = (await sql<{ comment: string; public: boolean }>`SELECT obj_description('reporting.dashboard_names'::regclass, 'pg_class') AS comment,
      has_table_privilege('public', 'reporting.dashboard_names', 'SELECT') AS public`.execute(db)).rows[0]!;
  assert.equal(meta, { comment: 'names of dashboards', public: true }, 'the view keeps its comment and grant');
  const schemas = (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = 'rebuild'`.execute(db)).rows[0]!.n;
  assert.is(schemas, 0, 'the shadow schema is gone');
});

online('when `npm run rebuild -- dashboards` runs beside the serving platform, then only the dashboards table is replaced, under traffic that sees no error and loses nothing', async ({ t, client, deviceId }) => {
  const { db } = t.platform.deps;
  const before = await oids(db);
  const traffic = startTraffic(t, client, deviceId, 'one');
  let stdout: string;
  try {
    await moreAnswers(traffic, 20);
    ({ stdout } = await promisify(execFile)(`${repo}node_modules/.bin/tsx`, [`${repo}projections/rebuild.ts`, '--', 'dashboards'], {
      cwd: repo,
      env: { ...process.env, DATABASE_URL: t.platform.deps.config.databaseUrl!, EVENTSTORE_URL: '', LOG_LEVEL: 'info' },
      timeout: 120_000,
    }));
    await moreAnswers(traffic, 20);
  } finally {
    await traffic.stop();
  }
  const report = JSON.parse(stdout.split('\n').find((l) => l.includes('read models rebuilt'))!);
  assert.equal(report.projections, ['dashboards']);
  const after = await oids(db);
  for (const table of Object.keys(before)) {
    if (table === 'dashboards') assert.is.not(after[table], before[table], 'dashboards is a new table');
    else assert.is(after[table], before[table], `${table} was left alone`);
  }
  await assertNothingMissing(t, traffic, deviceId, 'one');
  await assertEqualToReplay(t);
});

online('given a reader whose transaction holds one read model, when the swap has locked another and the reader asks for it, then the swap gives way and swaps again, and the reader gets its answer', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const before = await oids(db);
  const swapWaits = async () =>
    (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE relation = 'public.devices'::regclass AND mode = 'AccessExclusiveLock' AND NOT granted`.execute(db)).rows[0]!.n > 0;
  let rebuilt: ReturnType<typeof rebuild> | null = null;
  await db.connection().execute(async (reader) => {
    await sql`BEGIN`.execute(reader);
    try {
      // The reader holds \`devices\` until it commits.
      await sql`SELECT count(*) FROM devices`.execute(reader);
      rebuilt = rebuild(store, db, silent, { names: ['devices'] });
      // The swap locks the devices projection's tables in order, \`device_snapshots\` before \`devices\`: it now holds the one and waits for the other.
      for (let i = 0; !(await swapWaits()); i++) {
        if (i > 3000) throw new Error('the swap never waited for the devices table');
        await new Promise((r) => setTimeout(r, 10));
      }
      // A lock cycle: the reader now waits for what the swap holds.
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM device_snapshots`.execute(reader);
      assert.type(rows[0]!.n, 'number');
      await sql`COMMIT`.execute(reader);
    } catch (error) {
      await sql`ROLLBACK`.execute(reader);
      throw error;
    } finally {
      // Settled here, so a failure above leaves no rebuild running into the tests after it.
      await Promise.resolve(rebuilt).catch(() => undefined);
    }
  });
  const report = await rebuilt!;
  assert.ok(report.retries >= 1, `the swap gave way at least once (${report.retries})`);
  assert.is.not((await oids(db)).devices, before.devices, 'devices is a new table');
  await assertEqualToReplay(t);
});

online('when a rebuild runs, then a second one on the same database is refused until it ends', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const first = rebuild(store, db, silent, { names: ['devices'], batchSize: 20 });
  // The first holds its lock from its first query to its last.
  await new Promise((r) => setTimeout(r, 50));
  let refused: unknown = null;
  try {
    await rebuild(store, db, silent, { names: ['users'] });
  } catch (error) {
    refused = error;
  }
  await first;
  assert.instance(refused, RebuildBusyError);
  const again = await rebuild(store, db, silent, { names: ['users'] });
  assert.equal(again.projections, ['users']);
});

online.run();

const command = suite('rebuild command: names');

command('when `npm run rebuild` is given a name no read model has, then it exits non-zero and lists the valid names, touching nothing', async () => {
  let failure: { code?: number; stderr?: string } | null = null;
  try {
    await promisify(execFile)(`${repo}node_modules/.bin/tsx`, [`${repo}projections/rebuild.ts`, '--', 'dashbords'], { cwd: repo, env: { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' }, timeout: 60_000 });
  } catch (error) {
    failure = error as { code?: number; stderr?: string };
  }
  assert.ok(failure, 'the command failed');
  assert.is(failure!.code, 2);
  assert.match(failure!.stderr!, /unknown read model: dashbords/);
  for (const name of readModelNames()) assert.match(failure!.stderr!, new RegExp(`\\b${name}\\b`), `lists ${name}`);
});

command.run();
