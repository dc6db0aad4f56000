/**
 * `npm run bench:ingest`: the data path under load, against a plain aedes
 * broker as baseline, in the same run. Prints one JSON object.
 *
 * - Its own throw-away PostgreSQL cluster with durability ON (fsync and
 *   synchronous commit as in production), so an acknowledged message is on disk.
 * - The platform runs as its own process (`node --import tsx api/main.ts`), as
 *   does the baseline broker; publishers and the consumer run here.
 * - 1,000 devices, each on its own reserved topic, spread over 10 credentials
 *   sets; one QoS 1 connection per set, each keeping `BENCH_WINDOW` messages in
 *   flight, for `BENCH_SECONDS` (default 20). A consumer receives every change
 *   on its output topics through one mqtt channel on a device group of all devices.
 * - Latency: from publish to the consumer's receipt of the output message.
 *   Lost: acknowledged messages never delivered (after a drain of up to 15 s).
 * - Metrics overhead: after that run, the database is copied (as a template)
 *   once per round, so every round starts from the same data; rounds alternate
 *   without metrics and with METRICS_TOKEN set and `/metrics` scraped every
 *   `BENCH_SCRAPE_MS` (default 1,000): off then on, on then off, … for
 *   `BENCH_METRICS_ROUNDS` rounds (default 2), each copy checkpointed before
 *   its run. `BENCH_METRICS_ROUNDS=0` skips them.
 */
import type { ChildProcess } from 'node:child_process';
import { connectMqtt, cpuMeter, reserveTopics, spawnProcess, startPlatformProcess, type CpuPerMessage } from './processes.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type AddressInfo } from 'node:net';
import type { MqttClient } from 'mqtt';
import pg from 'pg';
import { Aedes } from 'aedes';
import { startPrivateCluster } from '../../migrations/cluster.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const CONNECTIONS = 10;
const DEVICES = 1000;
const WINDOW = Number(process.env.BENCH_WINDOW ?? 24);
const METRICS_ROUNDS = Number(process.env.BENCH_METRICS_ROUNDS ?? 2);
const SCRAPE_MS = Number(process.env.BENCH_SCRAPE_MS ?? 1000);
const METRICS_TOKEN = 'bench-metrics-token-0123456789';

const connectClient = connectMqtt;

interface RunResult {
  acceptedPerSecond: number;
  deliveredPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  published: number;
  acked: number;
  delivered: number;
  lost: number;
  /** CPU time per delivered message, from the first publish until everything was delivered. */
  cpu: CpuPerMessage;
}

/** Publishes for SECONDS from CONNECTIONS publishers, counting acks and what the consumer receives. */
async function run(cpu: { serverPid: number; postgresDataDir?: string; phase?: string }, port: number, publishers: { username?: string; password?: string; topics: string[] }[], consumer: MqttClient, seqOf: (topic: string, payload: Buffer) => { key: string; t: number } | null): Promise<RunResult> {
  const sentAt = new Map<string, number>();
  const acked = new Set<string>();
  const delivered = new Set<string>();
  const latencies: number[] = [];
  let ackedInWindow = 0;
  let lastDelivery = 0;
  let measuring = true;
  consumer.on('message', (topic, payload) => {
    const m = seqOf(topic, payload);
    if (!m || delivered.has(m.key)) return;
    delivered.add(m.key);
    lastDelivery = Date.now();
    // The publish time by the key: a diff carries `t` only when it changed (not for two reports in one millisecond).
    latencies.push(lastDelivery - (sentAt.get(m.key) ?? m.t));
  });
  const clients = await Promise.all(publishers.map((p, i) => connectClient(port, { username: p.username, password: p.password, clientId: `bench-pub-${i}` })));
  const meter = cpuMeter(cpu.serverPid, cpu.postgresDataDir);
  const started = Date.now();
  const until = started + SECONDS * 1000;
  let seq = 0;
  await Promise.all(
    clients.map(async (client, i) => {
      const topics = publishers[i]!.topics;
      let next = 0;
      const lane = async () => {
        while (Date.now() < until) {
          const topic = topics[next++ % topics.length]!;
          const key = `${topic}#${++seq}`;
          const t = Date.now();
          sentAt.set(key, t);
          await client.publishAsync(topic, JSON.stringify({ seq: key, t }), { qos: 1 });
          acked.add(key);
          if (measuring) ackedInWindow++;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  const ackedPerSecond = ackedInWindow / elapsed;
  // Drain: wait until everything acknowledged was delivered, or 15 s.
  const drainUntil = Date.now() + 15_000;
  while (Date.now() < drainUntil && [...acked].some((k) => !delivered.has(k))) await new Promise((r) => setTimeout(r, 100));
  measuring = false;
  const cpuPerMessage = meter.per(delivered.size, cpu.phase);
  // Delivered throughput: everything delivered, over the time from the first publish to the last delivery.
  const deliveredElapsed = (lastDelivery - started) / 1000;
  await Promise.all(clients.map((c) => c.endAsync()));
  latencies.sort((a, b) => a - b);
  const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))] ?? 0;
  const lost = [...acked].filter((k) => !delivered.has(k)).length;
  return {
    acceptedPerSecond: Math.round(ackedPerSecond),
    deliveredPerSecond: Math.round(delivered.size / deliveredElapsed),
    p50Ms: pct(0.5),
    p99Ms: pct(0.99),
    published: sentAt.size,
    acked: acked.size,
    delivered: delivered.size,
    lost,
    cpu: cpuPerMessage,
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-ingest-'));
  const cluster = startPrivateCluster(dir, 'bench');
  const children: ChildProcess[] = [];
  try {
    // ---- the platform ----
    const platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'));
    children.push(platform.child);
    const call = platform.call;
    const publishers = await reserveTopics(call, 'device', DEVICES, CONNECTIONS);
    // First messages create the devices; then one channel on a group of all of them.
    const warm = await Promise.all(publishers.map((p) => connectClient(platform.ports.mqtt!, { username: p.username, password: p.password })));
    await Promise.all(warm.flatMap((c, i) => publishers[i]!.topics.map((topic) => c.publishAsync(topic, JSON.stringify({ warm: true }), { qos: 1 }))));
    await Promise.all(warm.map((c) => c.endAsync()));
    let devices: { _id: string }[] = [];
    for (let tries = 0; devices.length < DEVICES && tries < 100; tries++) {
      devices = await call<{ _id: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id&filter[name]=${encodeURIComponent('bench/device-')}`);
      if (devices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
    }
    const consumerSet = await call('POST', '/api/basic-credentials-sets', { username: 'bench-consumer', password: 'bench-consumer-password' });
    const group = await call('POST', '/api/devicegroups', { name: 'bench', devices: devices.map((d) => d._id) });
    await call('POST', '/api/channels', { deviceGroup: group._id, mqtt: { type: 'basicCredentialsSet', recipient: consumerSet._id } });
    const consumer = await connectClient(platform.ports.mqtt!, { username: 'bench-consumer', password: 'bench-consumer-password' });
    await consumer.subscribeAsync(`svc/output/v2/${consumerSet._id}/#`, { qos: 1 });
    const ingest = await run({ serverPid: platform.child.pid!, postgresDataDir: join(dir, 'pg'), phase: 'ingest' }, platform.ports.mqtt!, publishers, consumer, (_topic, payload) => {
      const m = JSON.parse(payload.toString()) as { diff: { seq?: string; t?: number } };
      return m.diff.seq ? { key: m.diff.seq, t: m.diff.t ?? 0 } : null;
    });
    await consumer.endAsync();
    await platform.stop();

    // ---- metrics overhead: rounds without and with metrics, each on its own copy of the same data ----
    let copies = 0;
    const copy = async () => {
      const name = `bench_copy_${++copies}`;
      const admin = new pg.Client({ connectionString: cluster.url('postgres') });
      await admin.connect();
      await admin.query(`CREATE DATABASE ${name} TEMPLATE bench`);
      // The copy and the previous run's writes are flushed now, not during the next run.
      await admin.query('CHECKPOINT');
      await admin.end();
      return cluster.url(name);
    };
    const again = async (env: Record<string, string>) => {
      const p = await startPlatformProcess(await copy(), join(dir, 'data'), env);
      children.push(p.child);
      const c = await connectClient(p.ports.mqtt!, { username: 'bench-consumer', password: 'bench-consumer-password' });
      await c.subscribeAsync(`svc/output/v2/${consumerSet._id}/#`, { qos: 1 });
      const scrapes: number[] = [];
      let scraping = env.METRICS_TOKEN !== undefined;
      const scraper = (async () => {
        while (scraping) {
          const started = Date.now();
          const res = await fetch(`http://127.0.0.1:${p.ports.http}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
          if (res.status !== 200) throw new Error(`GET /metrics: ${res.status}`);
          await res.text();
          scrapes.push(Date.now() - started);
          await new Promise((r) => setTimeout(r, SCRAPE_MS));
        }
      })();
      const result = await run({ serverPid: p.child.pid!, postgresDataDir: join(dir, 'pg'), phase: scraping ? 'metrics-on' : 'metrics-off' }, p.ports.mqtt!, publishers, c, (_topic, payload) => {
        const m = JSON.parse(payload.toString()) as { diff: { seq?: string; t?: number } };
        return m.diff.seq ? { key: m.diff.seq, t: m.diff.t ?? 0 } : null;
      });
      scraping = false;
      await scraper;
      await c.endAsync();
      await p.stop();
      scrapes.sort((a, b) => a - b);
      return { ...result, scrapes: scrapes.length, scrapeP50Ms: scrapes[Math.floor(scrapes.length / 2)] ?? null, scrapeMaxMs: scrapes[scrapes.length - 1] ?? null };
    };
    const rounds: { off: Awaited<ReturnType<typeof again>>; on: Awaited<ReturnType<typeof again>> }[] = [];
    for (let i = 0; i < METRICS_ROUNDS; i++) {
      // Every other round runs metrics first, so neither side always runs second.
      if (i % 2 === 0) rounds.push({ off: await again({}), on: await again({ METRICS_TOKEN }) });
      else rounds.push({ on: await again({ METRICS_TOKEN }), off: await again({}) });
    }

    // ---- the baseline: the same load through a plain aedes broker ----
    const plain = await spawnProcess(['test/bench/ingest.ts', '--plain-broker'], {}, (ports) => ports.mqtt !== undefined);
    children.push(plain.child);
    const plainConsumer = await connectClient(plain.ports.mqtt!, {});
    await plainConsumer.subscribeAsync('svc/generic/v2/bench/#', { qos: 1 });
    const baseline = await run({ serverPid: plain.child.pid! }, plain.ports.mqtt!, publishers.map((p) => ({ topics: p.topics })), plainConsumer, (_topic, payload) => {
      const m = JSON.parse(payload.toString()) as { seq: string; t: number };
      return { key: m.seq, t: m.t };
    });
    await plainConsumer.endAsync();

    console.log(
      JSON.stringify(
        {
          benchmark: 'ingest',
          seconds: SECONDS,
          devices: DEVICES,
          connections: CONNECTIONS,
          inFlightPerConnection: WINDOW,
          durability: 'on (fsync, synchronous_commit)',
          acceptedPerSecond: ingest.acceptedPerSecond,
          deliveredPerSecond: ingest.deliveredPerSecond,
          p50LatencyMs: ingest.p50Ms,
          p99LatencyMs: ingest.p99Ms,
          lost: ingest.lost,
          acked: ingest.acked,
          delivered: ingest.delivered,
          cpuMicrosPerMessage: ingest.cpu,
          baseline: { broker: 'plain aedes, no ingest', acceptedPerSecond: baseline.acceptedPerSecond, deliveredPerSecond: baseline.deliveredPerSecond, p50LatencyMs: baseline.p50Ms, p99LatencyMs: baseline.p99Ms, lost: baseline.lost, cpuMicrosPerMessage: baseline.cpu },
          ratioToBaseline: baseline.deliveredPerSecond ? Number((ingest.deliveredPerSecond / baseline.deliveredPerSecond).toFixed(3)) : null,
          metrics: rounds.length
            ? {
                scrapeEveryMs: SCRAPE_MS,
                rounds: rounds.map(({ off, on }) => ({
                  off: { deliveredPerSecond: off.deliveredPerSecond, p50LatencyMs: off.p50Ms, p99LatencyMs: off.p99Ms, lost: off.lost },
                  on: { deliveredPerSecond: on.deliveredPerSecond, p50LatencyMs: on.p50Ms, p99LatencyMs: on.p99Ms, lost: on.lost, scrapes: on.scrapes, scrapeP50Ms: on.scrapeP50Ms, scrapeMaxMs: on.scrapeMaxMs },
                  ratioOnToOff: Number((on.deliveredPerSecond / off.deliveredPerSecond).toFixed(3)),
                })),
                ratioOnToOff: Number((rounds.reduce((a, r) => a + r.on.deliveredPerSecond, 0) / rounds.reduce((a, r) => a + r.off.deliveredPerSecond, 0)).toFixed(3)),
              }
            : 'skipped (BENCH_METRICS_ROUNDS=0)',
        },
        null,
        2,
      ),
    );
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv.includes('--plain-broker')) {
  // The baseline: aedes with its defaults, no authentication, no ingest.
  const aedes = await Aedes.createBroker();
  const server = createServer((socket) => aedes.handle(socket));
  server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ msg: 'MQTT listening', port: (server.address() as AddressInfo).port })));
  process.on('SIGTERM', () => process.exit(0));
} else {
  await main();
}
