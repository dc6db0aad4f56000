/**
 * `npm run bench:audit`: the audit log's NDJSON export over 1,000,000 events,
 * and time travel to an iotnode with 10,000 events, each beside a baseline
 * measured in the same run:
 *
 * - export: `GET /api/audit/events` with `Accept: application/x-ndjson`,
 *   read to the end by an HTTP client, against reading the same rows in the
 *   same order with plain keyset-paged `SELECT`s over `pg` (what the store
 *   reads, without upcasting, redaction, JSON and HTTP);
 * - time travel: `GET /api/iotnodes/{id}?at=…` at the instant of its last
 *   event (a fold of all 10,000), against the live `GET /api/iotnodes/{id}`
 *   (the read model) and a plain `SELECT` of the stream's rows.
 *
 * The events are written straight into `es.events` (a realistic mix: 1,000
 * devices' reports), and the subscribers' checkpoints are moved past them, so
 * this measures reads only. The platform runs as its own process on a
 * throw-away database with durability on. `BENCH_EVENTS` changes the count.
 *
 * The third figure, a rebuild of the read models while the platform serves
 * (into a shadow schema, then swapped in) against the same rebuild with the
 * platform stopped, is `npm run bench:rebuild` (test/bench/rebuild.ts) over
 * the same number of events, run here as a child process once the audit
 * figures are taken, its JSON under `rebuild` (`BENCH_REBUILD=0` leaves it out).
 *
 * Prints one JSON object on stdout; progress goes to stderr.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, loadavg } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startTestCluster, createTestDatabase } from '../support/cluster.js';
import { startPlatformProcess, type PlatformProcess } from './processes.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const DEVICE_EVENTS = 10_000;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 60);
const PAGE = 2000;

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);
const round = (x: number, digits = 1) => Math.round(x * 10 ** digits) / 10 ** digits;

function percentiles(ms: number[]) {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { p50: round(at(0.5), 2), p99: round(at(0.99), 2), mean: round(sorted.reduce((a, b) => a + b, 0) / sorted.length, 2) };
}

/** Reports of 1,000 devices, `count` of them, in chunks of one transaction each. */
async function writeReports(client: pg.Client, count: number): Promise<void> {
  const chunk = 100_000;
  for (let start = 0; start < count; start += chunk) {
    const n = Math.min(chunk, count - start);
    await client.query(
      `INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
       SELECT 'device-' || lpad(to_hex(1000000 + n % 1000), 24, '0'), n / 1000, gen_random_uuid(), 'DeviceReported',
         jsonb_build_object('id', lpad(to_hex(1000000 + n % 1000), 24, '0'), 'topic', 'svc/generic/v2/bench/' || (n % 1000), 'path', '[]'::jsonb,
           'payload', jsonb_build_object('temperature', round((18 + random() * 8)::numeric, 2), 'humidity', round((30 + random() * 40)::numeric, 1),
             'battery', 3000 + n % 300, 'rssi', -60 - n % 40, 'door', n % 2 = 0), 'reportedAt', t.at),
         jsonb_build_object('actor', 'credentials:6650c0ffee00000000000001', 'correlationId', 'mqtt:bench:' || n, 'time', t.at, 'schemaVersion', 1)
       FROM generate_series($1::bigint, $2::bigint) n,
         LATERAL (SELECT to_char((timestamptz '2026-01-01T00:00:00Z' + n * interval '10 ms') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at) t`,
      [start, start + n - 1],
    );
    log(`  ${start + n} events written`);
  }
}

/** Reads the same rows the export reads, in the same order and pages, with nothing else. */
async function plainSelect(client: pg.Client): Promise<number> {
  let after = ['0', '0'];
  let rows = 0;
  for (;;) {
    const { rows: page } = await client.query(
      `SELECT event_id, type, data, metadata, stream_id, revision, transaction_id::text AS tx, global_position FROM es.events
       WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint) AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY transaction_id, global_position LIMIT ${PAGE}`,
      after,
    );
    rows += page.length;
    if (page.length < PAGE) return rows;
    const last = page[page.length - 1];
    after = [last.tx, String(last.global_position)];
  }
}

/** The NDJSON export read to its end; answers the number of lines. */
async function exportAll(platform: PlatformProcess): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${platform.ports.http}/api/audit/events`, { headers: { authorization: `Bearer ${platform.token}`, accept: 'application/x-ndjson' } });
  if (res.status !== 200) throw new Error(`export answered ${res.status}: ${await res.text()}`);
  let lines = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    const bytes = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    for (let at = bytes.indexOf(10); at >= 0; at = bytes.indexOf(10, at + 1)) lines++;
  }
  return lines;
}

const cluster = await startTestCluster();
const databaseUrl = await createTestDatabase();
const dataDir = mkdtempSync(join(tmpdir(), 'bench-audit-'));
const client = new pg.Client({ connectionString: databaseUrl });
await client.connect();
let platform: PlatformProcess | null = null;
try {
  // A first start creates the admin and every subscriber's checkpoint; the device for time travel is registered through REST.
  platform = await startPlatformProcess(databaseUrl, dataDir);
  const device = await platform.call('POST', '/api/iotnodes', { name: 'time-travelled boiler', category: 'bench' });
  await platform.stop();

  log(`writing ${EVENTS} events of 1,000 devices, and ${DEVICE_EVENTS - 1} reports of one more`);
  let started = performance.now();
  await writeReports(client, EVENTS - (DEVICE_EVENTS - 1));
  // Every subscriber starts past the bench events: this measures reads, not the read models catching up.
  await client.query(`UPDATE es.checkpoints SET (commit_position, prepare_position) =
    (SELECT transaction_id::text::numeric, global_position FROM es.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1)`);
  // The time-travelled device's reports come after: the platform applies them at start, so its snapshots are made as in production.
  await client.query(
    `INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
     SELECT $1, n, gen_random_uuid(), 'DeviceReported',
       jsonb_build_object('id', $2::text, 'topic', '/api/iotnodes/' || $2 || '/uplinks', 'path', '[]'::jsonb,
         'payload', jsonb_build_object('temperature', 40 + n % 30, 'pressure', round((1 + random())::numeric, 3), 'state', CASE WHEN n % 7 = 0 THEN 'idle' ELSE 'heating' END), 'reportedAt', t.at),
       jsonb_build_object('actor', 'credentials:6650c0ffee00000000000002', 'correlationId', 'bench:' || n, 'time', t.at, 'schemaVersion', 1)
     FROM generate_series(1, $3::int) n,
       LATERAL (SELECT to_char((now() + n * interval '1 ms') AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at) t`,
    [`device-${device._id}`, device._id, DEVICE_EVENTS - 1],
  );
  const { rows: total } = await client.query<{ n: string }>('SELECT count(*) AS n FROM es.events');
  log(`written in ${round((performance.now() - started) / 1000)} s; ${total[0]!.n} events in the store`);
  await client.query('ANALYZE es.events');
  const { rows: lastReport } = await client.query<{ time: string }>(`SELECT metadata->>'time' AS time FROM es.events WHERE stream_id = $1 ORDER BY revision DESC LIMIT 1`, [`device-${device._id}`]);

  platform = await startPlatformProcess(databaseUrl, dataDir);
  const exported: Record<string, number>[] = [];
  const baseline: Record<string, number>[] = [];
  // Alternating rounds, so both see the same load on a shared machine.
  for (let round_ = 0; round_ < 2; round_++) {
    log(`export round ${round_ + 1}`);
    started = performance.now();
    const lines = await exportAll(platform);
    const s = (performance.now() - started) / 1000;
    exported.push({ events: lines, seconds: round(s, 2), eventsPerSecond: Math.round(lines / s) });
    started = performance.now();
    const rows = await plainSelect(client);
    const b = (performance.now() - started) / 1000;
    baseline.push({ rows, seconds: round(b, 2), rowsPerSecond: Math.round(rows / b) });
  }
  const best = exported.reduce((a, b) => (b.eventsPerSecond! > a.eventsPerSecond! ? b : a));
  const bestBaseline = baseline.reduce((a, b) => (b.rowsPerSecond! > a.rowsPerSecond! ? b : a));

  log('time travel');
  const base = `http://127.0.0.1:${platform.ports.http}/api/iotnodes/${device._id}`;
  const get = async (url: string) => {
    const res = await fetch(url, { headers: { authorization: `Bearer ${platform!.token}` } });
    if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const atUrl = `${base}?at=${encodeURIComponent(lastReport[0]!.time)}`;
  const folded = await get(atUrl);
  const live = await get(base);
  const times = { travel: [] as number[], live: [] as number[], select: [] as number[] };
  for (let i = 0; i < SAMPLES + 5; i++) {
    const t0 = performance.now();
    await get(atUrl);
    const t1 = performance.now();
    await get(base);
    const t2 = performance.now();
    await client.query('SELECT event_id, type, data, metadata, revision FROM es.events WHERE stream_id = $1 ORDER BY revision', [`device-${device._id}`]);
    const t3 = performance.now();
    if (i < 5) continue;
    times.travel.push(t1 - t0);
    times.live.push(t2 - t1);
    times.select.push(t3 - t2);
  }
  const travel = percentiles(times.travel);
  const result = {
    events: Number(total[0]!.n),
    export: {
      request: 'GET /api/audit/events, Accept: application/x-ndjson, admin, no filter, read to the end',
      best,
      rounds: exported,
      aim: { eventsPerSecondAtLeast: 50_000, met: best.eventsPerSecond! >= 50_000 },
    },
    exportBaseline: { what: `the same rows in the same order, keyset-paged SELECTs of ${PAGE} over pg`, best: bestBaseline, rounds: baseline },
    exportShareOfBaseline: round(best.eventsPerSecond! / bestBaseline.rowsPerSecond!, 2),
    timeTravel: {
      request: 'GET /api/iotnodes/{id}?at=<time of its last event>: a fold of 10,000 events',
      deviceEvents: DEVICE_EVENTS,
      samples: SAMPLES,
      ms: travel,
      sameAsLive: JSON.stringify(Object.entries(folded).sort()) === JSON.stringify(Object.entries(live).sort()),
      snapshotsOfTheDevice: Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM device_snapshots WHERE device_id = $1', [device._id])).rows[0]!.n),
      aim: { p50MsBelow: 100, met: travel.p50 < 100 },
    },
    timeTravelBaselines: {
      live: { what: 'GET /api/iotnodes/{id} (the read model)', ms: percentiles(times.live) },
      selectStream: { what: 'SELECT of the stream\'s 10,000 rows over pg', ms: percentiles(times.select) },
    },
    rebuild: null as unknown,
    loadAverage: loadavg().map((x) => round(x, 2)),
  };
  await platform?.stop();
  if (process.env.BENCH_REBUILD !== '0') {
    process.stderr.write(`rebuild of ${EVENTS} events, serving and stopped (test/bench/rebuild.ts)\n`);
    const child = spawnSync(process.execPath, ['--import', 'tsx', 'test/bench/rebuild.ts'], {
      cwd: new URL('../..', import.meta.url).pathname,
      env: { ...process.env, REBUILD_EVENTS: String(EVENTS) },
      stdio: ['ignore', 'pipe', 'inherit'],
      maxBuffer: 64 * 1024 * 1024,
    });
    if (child.status !== 0) throw new Error(`test/bench/rebuild.ts exited with ${child.status}`);
    result.rebuild = JSON.parse(child.stdout.toString());
  } else {
    result.rebuild = { measured: false, why: 'BENCH_REBUILD=0' };
  }
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} finally {
  await platform?.stop();
  await client.end();
  rmSync(dataDir, { recursive: true, force: true });
  await cluster.stop();
}
