/**
 * `npm run bench:calculations`: device reports per second through ingest with
 * 100 `onChange` calculations, beside the same ingest with none, in the same
 * run and on the same platform process. Prints one JSON object.
 *
 * - Its own throw-away PostgreSQL cluster with durability ON; the platform as
 *   its own process (`api/main.ts`); publishers here.
 * - `BENCH_DEVICES` devices (default 1,000, as `bench:ingest`) on their own
 *   reserved topics over 10 credentials sets, one QoS 1 connection per set
 *   keeping `BENCH_WINDOW` messages in flight, for `BENCH_SECONDS` (default
 *   10) per round. Rounds alternate: none, with calculations (created before
 *   the round), none (deleted), with (created again), so neither side is
 *   always the later one.
 * - With calculations, a report of one of the first 100 devices runs one
 *   window calculation (the mean of its last hour) and stores one result
 *   report; `lagAfterLastAckMs` is how long after the last acknowledgement of
 *   a round its last result is stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { connectMqtt, reserveTopics, startPlatformProcess } from './processes.js';
import { createCalculationLoad, deleteCalculationLoad } from './calculationLoad.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WINDOW = Number(process.env.BENCH_WINDOW ?? 24);
const CONNECTIONS = 10;
const DEVICES = Number(process.env.BENCH_DEVICES ?? 1000);
const CALCULATIONS = 100;

const connectClient = connectMqtt;

/** Publishes for SECONDS; answers acknowledged reports per second and how many were acknowledged. */
async function round(port: number, publishers: { username: string; password: string; topics: string[] }[]): Promise<{ perSecond: number; acked: number }> {
  const clients = await Promise.all(publishers.map((p, i) => connectClient(port, { username: p.username, password: p.password, clientId: `bench-calc-${i}` })));
  let acked = 0;
  let n = 0;
  const started = Date.now();
  const until = started + SECONDS * 1000;
  await Promise.all(
    clients.map(async (client, i) => {
      const topics = publishers[i]!.topics;
      let next = 0;
      const lane = async () => {
        while (Date.now() < until) {
          await client.publishAsync(topics[next++ % topics.length]!, JSON.stringify({ value: ++n % 97 }), { qos: 1 });
          acked++;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  await Promise.all(clients.map((c) => c.endAsync()));
  return { perSecond: Math.round(acked / elapsed), acked };
}

/** Reports stored so far of the calculations' source devices (results excluded): each sets off one calculation. */
async function countSourceReports(pool: pg.Pool, sources: string[]): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported' AND stream_id = ANY($1::text[]) AND metadata->>'actor' NOT LIKE 'calculation:%'`, [sources.map((id) => `device-${id}`)]);
  return Number(rows[0]!.n);
}

async function countResults(pool: pg.Pool): Promise<number> {
  const { rows } = await pool.query<{ n: string }>(`SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported' AND metadata->>'actor' LIKE 'calculation:%'`);
  return Number(rows[0]!.n);
}

/** Waits until `expected` results are stored (or 120 s); answers how long that took. */
async function drain(pool: pg.Pool, expected: number): Promise<{ lagMs: number; results: number }> {
  const started = Date.now();
  let results = await countResults(pool);
  while (results < expected && Date.now() - started < 120_000) {
    await new Promise((r) => setTimeout(r, 100));
    results = await countResults(pool);
  }
  return { lagMs: Date.now() - started, results };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-calculations-'));
  const cluster = startPrivateCluster(dir, 'bench');
  const pool = new pg.Pool({ connectionString: cluster.url('bench'), max: 2 });
  let platform: Awaited<ReturnType<typeof startPlatformProcess>> | null = null;
  try {
    platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'));
    const { call } = platform;
    const port = platform.ports.mqtt!;
    const publishers = await reserveTopics(call, 'calc', DEVICES, CONNECTIONS);
    const warm = await Promise.all(publishers.map((p) => connectClient(port, { username: p.username, password: p.password })));
    await Promise.all(warm.flatMap((c, i) => publishers[i]!.topics.map((topic) => c.publishAsync(topic, JSON.stringify({ value: 0 }), { qos: 1 }))));
    await Promise.all(warm.map((c) => c.endAsync()));
    let devices: { _id: string }[] = [];
    for (let tries = 0; devices.length < DEVICES && tries < 100; tries++) {
      devices = await call<{ _id: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id&filter[name]=${encodeURIComponent('bench/calc-')}`);
      if (devices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
    }

    // The devices in `devices` come ordered by name; any 100 of them do.
    const sources = devices.slice(0, CALCULATIONS).map((d) => d._id);
    const without: number[] = [];
    const withCalcs: number[] = [];
    const lags: number[] = [];
    let results = 0;
    let reportsWith = 0;
    for (let r = 0; r < 2; r++) {
      without.push((await round(port, publishers)).perSecond);
      const ids = await createCalculationLoad(call, sources);
      const before = await countResults(pool);
      const reportsBefore = await countSourceReports(pool, sources);
      const measured = await round(port, publishers);
      withCalcs.push(measured.perSecond);
      const expected = (await countSourceReports(pool, sources)) - reportsBefore;
      const drained = await drain(pool, before + expected);
      lags.push(drained.lagMs);
      results += drained.results - before;
      reportsWith += expected;
      await deleteCalculationLoad(call, ids);
    }
    const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
    console.log(
      JSON.stringify(
        {
          benchmark: 'calculations',
          seconds: SECONDS,
          devices: DEVICES,
          calculations: CALCULATIONS,
          inFlightPerConnection: WINDOW,
          durability: 'on (fsync, synchronous_commit)',
          reportsPerSecondWithCalculations: mean(withCalcs),
          rounds: { with: withCalcs, without },
          results: { reportsOfSources: reportsWith, stored: results, lagAfterLastAckMs: lags },
          baseline: { what: 'the same ingest with no calculation', reportsPerSecond: mean(without) },
          ratioToBaseline: Number((mean(withCalcs) / mean(without)).toFixed(3)),
        },
        null,
        2,
      ),
    );
  } finally {
    await platform?.stop().catch(() => undefined);
    await pool.end();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
