/**
 * `npm run bench:rebuild`: `npm run rebuild` of every read model over
 * 1,000,000 events while the platform serves traffic, beside the same rebuild
 * with the platform stopped, in the same run.
 *
 * 1,000 devices are registered through REST; their reports are written
 * straight into `es.events` (`REBUILD_EVENTS` in all, 1,000,000 by default)
 * and every checkpoint is moved past them. The first rebuild runs with the
 * platform stopped (it is also what brings the read models to those events);
 * then the platform starts as its own process and the second rebuild runs
 * while REST clients read and write and devices publish over MQTT. Both are
 * the command itself (`projections/rebuild.ts`), as an operator runs it.
 *
 * Prints one JSON object on stdout; progress goes to stderr.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import mqtt from 'mqtt';
import pg from 'pg';
import { createTestDatabase, startTestCluster } from '../support/cluster.js';
import { startPlatformProcess, type PlatformProcess } from './processes.js';

const EVENTS = Number(process.env.REBUILD_EVENTS ?? 1_000_000);
const DEVICES = 1000;
const repo = fileURLToPath(new URL('../..', import.meta.url));

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

interface RebuildLine {
  events: number;
  ms: number;
  pausedMs: number;
  lockedMs: number;
}

/** `tsx projections/rebuild.ts` on the database; answers its report line. */
async function runRebuild(databaseUrl: string, dataDir: string): Promise<RebuildLine> {
  const { stdout } = await promisify(execFile)(join(repo, 'node_modules/.bin/tsx'), [join(repo, 'projections/rebuild.ts')], {
    cwd: repo,
    env: { ...process.env, DATABASE_URL: databaseUrl, DATA_DIR: dataDir, EVENTSTORE_URL: '', LOG_LEVEL: 'info' },
    maxBuffer: 64 * 1024 * 1024,
    timeout: 3_600_000,
  });
  const line = stdout.split('\n').find((l) => l.includes('read models rebuilt'));
  if (!line) throw new Error(`the rebuild printed no report:\n${stdout.slice(-2000)}`);
  return JSON.parse(line) as RebuildLine;
}

/** Reports of the devices, `count` of them, round robin, in chunks of one transaction each. */
async function writeReports(client: pg.Client, ids: string[], count: number, firstRevision: number): Promise<void> {
  const chunk = 100_000;
  for (let start = 0; start < count; start += chunk) {
    const n = Math.min(chunk, count - start);
    await client.query(
      `INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
       SELECT 'device-' || d.id, $4::int + n / $5::int, gen_random_uuid(), 'DeviceReported',
         jsonb_build_object('id', d.id, 'topic', '/api/iotnodes/' || d.id || '/uplinks', 'path', '[]'::jsonb,
           'payload', jsonb_build_object('temperature', round((18 + random() * 8)::numeric, 2), 'humidity', round((30 + random() * 40)::numeric, 1),
             'battery', 3000 + n % 300, 'door', n % 2 = 0), 'reportedAt', t.at),
         jsonb_build_object('actor', 'bench', 'correlationId', 'bench:' || n, 'time', t.at)
       FROM generate_series($1::bigint, $2::bigint) n
         JOIN LATERAL (SELECT ($3::text[])[1 + n % $5::int] AS id) d ON true
         JOIN LATERAL (SELECT to_char((timestamptz '2026-01-01T00:00:00Z' + n * interval '10 ms') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at) t ON true`,
      [start, start + n - 1, ids, firstRevision, ids.length],
    );
    log(`  ${start + n} events written`);
  }
}

interface Served {
  requests: number;
  errors: number;
  /** Each answer of 300 or more: status and path. */
  errorAnswers: string[];
  published: number;
  latencyMs: { p50: number; p99: number; max: number };
}

/**
 * Steady traffic until stopped: four REST readers (a device, the dashboards
 * list) every 100 ms each, a dashboard written every 100 ms, a device report
 * published every 10 ms. A fixed rate, not as fast as possible: the figure is
 * the rebuild's speed beside a platform at work, not two loads racing for the
 * same cores.
 */
function serve(platform: PlatformProcess, ids: string[]): { stop(): Promise<Served> } {
  let running = true;
  const latencies: number[] = [];
  const errorAnswers: string[] = [];
  let published = 0;
  const base = `http://127.0.0.1:${platform.ports.http}`;
  const get = async (path: string, init: RequestInit = {}) => {
    const started = performance.now();
    const res = await fetch(base + path, { ...init, headers: { 'content-type': 'application/json', authorization: `Bearer ${platform.token}` } });
    await res.arrayBuffer();
    latencies.push(performance.now() - started);
    if (res.status >= 300) errorAnswers.push(`${res.status} ${init.method ?? 'GET'} ${path}`);
  };
  const readers = Array.from({ length: 4 }, async (_, r) => {
    for (let i = r; running; i++) {
      await get(`/api/iotnodes/${ids[i % ids.length]}`);
      await get('/api/dashboards');
      await new Promise((r) => setTimeout(r, 100));
    }
  });
  const writer = (async () => {
    for (let i = 0; running; i++) {
      await get('/api/dashboards', { method: 'POST', body: JSON.stringify({ name: `served ${i}` }) });
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  const publisher = (async () => {
    const client = await mqtt.connectAsync(`mqtt://127.0.0.1:${platform.ports.mqtt}`, { username: 'bench-meters', password: 'bench-meters-password', reconnectPeriod: 0 });
    for (let i = 0; running; i++) {
      await client.publishAsync(`svc/generic/v2/bench/meter-${i % 10}`, JSON.stringify({ seq: i, temperature: 20 + (i % 10) }), { qos: 1 });
      published++;
      await new Promise((r) => setTimeout(r, 10));
    }
    await client.endAsync();
  })();
  return {
    stop: async () => {
      running = false;
      await Promise.all([...readers, writer, publisher]);
      const sorted = latencies.sort((a, b) => a - b);
      const at = (q: number) => round(sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? 0, 1);
      return { requests: sorted.length, errors: errorAnswers.length, errorAnswers, published, latencyMs: { p50: at(0.5), p99: at(0.99), max: round(sorted[sorted.length - 1] ?? 0) } };
    },
  };
}

const cluster = await startTestCluster();
const databaseUrl = await createTestDatabase();
const dataDir = mkdtempSync(join(tmpdir(), 'bench-rebuild-'));
const client = new pg.Client({ connectionString: databaseUrl });
await client.connect();
let platform: PlatformProcess | null = null;
try {
  platform = await startPlatformProcess(databaseUrl, dataDir);
  log(`registering ${DEVICES} devices and a publisher through REST`);
  const ids: string[] = [];
  for (let i = 0; i < DEVICES; i += 20) {
    const made = await Promise.all(Array.from({ length: Math.min(20, DEVICES - i) }, (_, k) => platform!.call('POST', '/api/iotnodes', { name: `meter ${i + k}`, category: 'bench' })));
    ids.push(...made.map((d) => d._id));
  }
  const set = await platform.call('POST', '/api/basic-credentials-sets', { username: 'bench-meters', password: 'bench-meters-password' });
  for (let m = 0; m < 10; m++) await platform.call('POST', '/api/reserved-mqtt-topics', { topic: `svc/generic/v2/bench/meter-${m}`, basicCredentialsSetId: set._id });
  await platform.stop();
  platform = null;

  const { rows: revs } = await client.query<{ r: number }>(`SELECT coalesce(max(revision), 0)::int AS r FROM es.events WHERE stream_id LIKE 'device-%'`);
  const reports = EVENTS - Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM es.events')).rows[0]!.n);
  log(`writing ${reports} reports`);
  let started = performance.now();
  await writeReports(client, ids, reports, revs[0]!.r + 1);
  // Every subscriber starts past them: the reactors have nothing to do, and the read models get them from the first rebuild.
  await client.query(`UPDATE es.checkpoints SET (commit_position, prepare_position) =
    (SELECT transaction_id::text::numeric, global_position FROM es.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1)`);
  await client.query('VACUUM ANALYZE es.events');
  const total = Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM es.events')).rows[0]!.n);
  log(`written in ${round((performance.now() - started) / 1000)} s; ${total} events in the store`);

  log('rebuild with the platform stopped');
  const stopped = await runRebuild(databaseUrl, dataDir);
  log(`  ${stopped.events} events in ${round(stopped.ms / 1000)} s`);

  platform = await startPlatformProcess(databaseUrl, dataDir);
  const traffic = serve(platform, ids);
  await new Promise((r) => setTimeout(r, 2000));
  log('rebuild with the platform serving');
  started = performance.now();
  const online = await runRebuild(databaseUrl, dataDir);
  const served = await traffic.stop();
  log(`  ${online.events} events in ${round(online.ms / 1000)} s; ${served.requests} requests, ${served.published} publishes served`);

  const rate = (r: RebuildLine) => Math.round(r.events / (r.ms / 1000));
  console.log(
    JSON.stringify(
      {
        benchmark: 'rebuild',
        events: total,
        stopped: { events: stopped.events, seconds: round(stopped.ms / 1000, 2), eventsPerSecond: rate(stopped) },
        online: { events: online.events, seconds: round(online.ms / 1000, 2), eventsPerSecond: rate(online), runnerPausedMs: online.pausedMs, readersWaitedMs: online.lockedMs, served },
        ratio: round(rate(online) / rate(stopped), 2),
        aim: { ratio: 0.5, met: rate(online) / rate(stopped) >= 0.5 },
        loadAverage: loadavg().map((x) => round(x, 2)),
      },
      null,
      2,
    ),
  );
} finally {
  await platform?.stop();
  await client.end();
  rmSync(dataDir, { recursive: true, force: true });
  await cluster.stop();
}
