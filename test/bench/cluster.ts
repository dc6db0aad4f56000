/**
 * `npm run bench:cluster`: the data path end to end (QoS 1 publish → stored
 * event → output topic at a consumer) through platform processes, printed as
 * one JSON object:
 *
 * - baseline: one process without `REDIS_URL` (the single-process platform);
 * - 1 node: one process with `REDIS_URL` (cluster mode, one node);
 * - 2 nodes: two processes on the same database and Redis, publishers spread
 *   over both, the consumer on the second: half the messages cross nodes.
 *   Its latency figures are those of messages published to the first node
 *   and received from the second (cross-node delivery).
 *
 * Each mode also reports the CPU time per accepted message of the platform's
 * nodes together, of PostgreSQL, of Redis and of the load generator.
 *
 * Each run has its own database in one throw-away PostgreSQL cluster with
 * durability on, and its own Redis (Debian's redis-server, append-only). On a
 * 2-core machine the nodes, PostgreSQL, Redis and the load generator all share
 * the same two cores: the 2-node figure says what the coordination costs, not
 * what a second machine adds.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import pgDriver from 'pg';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { RedisServer } from '../support/redis.js';
import { PlatformNode } from '../support/nodes.js';
import { connectMqtt, cpuMicros, postgresCpuMicros, reserveTopics } from './processes.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 15);
const CONNECTIONS = 10;
const DEVICES = 200;
const WINDOW = Number(process.env.BENCH_WINDOW ?? 24);

const connect = connectMqtt;

interface Figures {
  deliveredPerSecond: number;
  acceptedPerSecond: number;
  p50LatencyMs: number;
  p99LatencyMs: number;
  crossNode?: { p50LatencyMs: number; p99LatencyMs: number; messages: number };
  acked: number;
  lost: number;
  /** Of the `lost` (acknowledged, never at the consumer): how many are in the event store all the same. */
  lostButStored: number;
  /** Events stored but not yet handled by the `output-mqtt` reactor when the drain ended: a lag, not a loss, while above 0. */
  outputBacklog: number;
  /** Times the consumer's connection closed during the run. */
  consumerDisconnects: number;
  /** CPU time per accepted message while publishing, µs: every platform node together, PostgreSQL, Redis, the load generator. */
  cpuPerMessage: { nodes: number; postgres: number; redis: number; loadGenerator: number };
}

/** Where the CPU of a run goes: the platform's nodes, PostgreSQL's cluster (its data folder), Redis, and this process. */
interface Meters {
  pgdata: string;
  redisPid?: number;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;

/** Sets up devices and a consumer channel through `nodes[0]`, then publishes for SECONDS: connection i to node i % nodes. */
async function measure(nodes: PlatformNode[], databaseUrl: string, meters: Meters): Promise<Figures> {
  const first = nodes[0]!;
  const must = async (method: string, path: string, body?: unknown) => {
    const res = await first.call(method, path, body);
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const publishers = (await reserveTopics(must, 'device', DEVICES, CONNECTIONS)).map((p, c) => ({ ...p, node: c % nodes.length }));
  // Every node's broker knows the sets once its indexes follow: retried until the login works.
  const clients: MqttClient[] = [];
  for (const p of publishers) {
    for (let tries = 0; ; tries++) {
      try {
        clients.push(await connect(nodes[p.node]!.mqtt, { username: p.username, password: p.password, clientId: `bench-pub-${p.username}` }));
        break;
      } catch (err) {
        if (tries > 50) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  await Promise.all(clients.flatMap((c, i) => publishers[i]!.topics.map((topic) => c.publishAsync(topic, JSON.stringify({ warm: true }), { qos: 1 }))));
  let devices: { _id: string }[] = [];
  for (let tries = 0; devices.length < DEVICES && tries < 100; tries++) {
    devices = await must('GET', `/api/iotnodes?limit=1000&fields=_id&filter[name]=${encodeURIComponent('bench/device-')}`);
    if (devices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
  }
  const consumerSet = await must('POST', '/api/basic-credentials-sets', { username: 'bench-consumer', password: 'bench-consumer-password' });
  const group = await must('POST', '/api/devicegroups', { name: 'bench', devices: devices.map((d) => d._id) });
  await must('POST', '/api/channels', { deviceGroup: group._id, mqtt: { type: 'basicCredentialsSet', recipient: consumerSet._id } });
  const last = nodes[nodes.length - 1]!;
  let consumer: MqttClient | null = null;
  for (let tries = 0; !consumer; tries++) {
    consumer = await connect(last.mqtt, { username: 'bench-consumer', password: 'bench-consumer-password' }).catch((err) => {
      if (tries > 50) throw err;
      return new Promise<null>((r) => setTimeout(() => r(null), 100));
    });
  }
  await consumer.subscribeAsync(`svc/output/v2/${consumerSet._id}/#`, { qos: 1 });
  await new Promise((r) => setTimeout(r, 1000));

  const acked = new Set<string>();
  const delivered = new Set<string>();
  const latencies: number[] = [];
  const crossLatencies: number[] = [];
  let lastDelivery = 0;
  let ackedInWindow = 0;
  let consumerDisconnects = 0;
  consumer.on('close', () => consumerDisconnects++);
  // What each message was, by its key: the diff on the output topic carries only what changed, so a report sent in
  // the same millisecond as the device's previous one arrives without `t` (and `n` never changes for a device).
  const sent = new Map<string, { t: number; node: number }>();
  consumer.on('message', (_topic, payload) => {
    const m = JSON.parse(String(payload)) as { diff: { seq?: string } };
    const key = m.diff.seq;
    const s = key === undefined ? undefined : sent.get(key);
    if (!key || !s || delivered.has(key)) return;
    delivered.add(key);
    lastDelivery = Date.now();
    latencies.push(lastDelivery - s.t);
    if (nodes.length > 1 && s.node !== nodes.length - 1) crossLatencies.push(lastDelivery - s.t);
  });
  const cpu = () => ({
    nodes: nodes.reduce((sum, n) => sum + cpuMicros(n.child.pid!), 0),
    postgres: postgresCpuMicros(meters.pgdata),
    redis: meters.redisPid ? cpuMicros(meters.redisPid) : 0,
    own: process.cpuUsage(),
  });
  const before = cpu();
  const started = Date.now();
  const stopAt = started + SECONDS * 1000;
  let seq = 0;
  await Promise.all(
    clients.map(async (client, i) => {
      const { topics, node } = publishers[i]!;
      let next = 0;
      const lane = async () => {
        while (Date.now() < stopAt) {
          const key = `s${++seq}`;
          const t = Date.now();
          sent.set(key, { t, node });
          await client.publishAsync(topics[next++ % topics.length]!, JSON.stringify({ seq: key, t, n: node }), { qos: 1 });
          acked.add(key);
          ackedInWindow++;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  const elapsed = (Date.now() - started) / 1000;
  const after = cpu();
  const own = process.cpuUsage(before.own);
  const per = (micros: number) => Math.round(micros / Math.max(1, ackedInWindow));
  const cpuPerMessage = {
    nodes: per(after.nodes - before.nodes),
    postgres: per(after.postgres - before.postgres),
    redis: per(after.redis - before.redis),
    loadGenerator: per(own.user + own.system),
  };
  const drainUntil = Date.now() + 20_000;
  while (Date.now() < drainUntil && [...acked].some((k) => !delivered.has(k))) await new Promise((r) => setTimeout(r, 100));
  const disconnects = consumerDisconnects;
  await Promise.all([...clients, consumer].map((c) => c.endAsync()));
  const missing = [...acked].filter((k) => !delivered.has(k));
  const db = new pgDriver.Client({ connectionString: databaseUrl });
  await db.connect();
  const stored = missing.length
    ? Number((await db.query<{ n: string }>(`SELECT count(DISTINCT data->'payload'->>'seq') AS n FROM es.events WHERE type = 'DeviceReported' AND data->'payload'->>'seq' = ANY($1::text[])`, [missing])).rows[0]!.n)
    : 0;
  const backlog = Number(
    (await db.query<{ n: string }>(`SELECT count(*) AS n FROM es.events e, es.checkpoints c
      WHERE c.name = 'output-mqtt' AND (e.transaction_id, e.global_position) > (c.commit_position::text::xid8, c.prepare_position::bigint)`)).rows[0]?.n ?? 0,
  );
  await db.end();
  latencies.sort((a, b) => a - b);
  crossLatencies.sort((a, b) => a - b);
  return {
    deliveredPerSecond: Math.round(delivered.size / ((lastDelivery - started) / 1000)),
    acceptedPerSecond: Math.round(ackedInWindow / elapsed),
    p50LatencyMs: pct(latencies, 0.5),
    p99LatencyMs: pct(latencies, 0.99),
    ...(nodes.length > 1 ? { crossNode: { p50LatencyMs: pct(crossLatencies, 0.5), p99LatencyMs: pct(crossLatencies, 0.99), messages: crossLatencies.length } } : {}),
    acked: acked.size,
    lost: missing.length,
    lostButStored: stored,
    outputBacklog: backlog,
    consumerDisconnects: disconnects,
    cpuPerMessage,
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-cluster-'));
  const pg = startPrivateCluster(dir, 'bench_single');
  const started: { stop(): Promise<void> }[] = [];
  const run = async (database: string, count: number, redis: boolean): Promise<Figures> => {
    startPrivateCluster(dir, database);
    const r = redis ? await new RedisServer().start() : null;
    const env = { DATABASE_URL: pg.url(database), ...(r ? { REDIS_URL: r.url } : {}) };
    const nodes: PlatformNode[] = [];
    for (let i = 0; i < count; i++) {
      const node = new PlatformNode(`bench-${i}`, env);
      started.push(node);
      nodes.push(await node.start());
    }
    try {
      return await measure(nodes, pg.url(database), { pgdata: join(dir, 'pg'), redisPid: r?.pid });
    } finally {
      for (const n of nodes) await n.stop();
      await r?.destroy();
    }
  };
  try {
    const single = await run('bench_single', 1, false);
    const one = await run('bench_one', 1, true);
    const two = await run('bench_two', 2, true);
    console.log(
      JSON.stringify(
        {
          benchmark: 'cluster',
          seconds: SECONDS,
          devices: DEVICES,
          connections: CONNECTIONS,
          inFlightPerConnection: WINDOW,
          durability: 'on (fsync, synchronous_commit; Redis appendfsync always)',
          cores: (await import('node:os')).cpus().length,
          note: 'every process (nodes, PostgreSQL, Redis, load generator) shares the same cores: 2 nodes here measure the cost of coordination, not the capacity of a second machine',
          baseline: { mode: 'single process, no REDIS_URL', ...single },
          oneNode: { mode: 'cluster mode, 1 node', ...one },
          twoNodes: { mode: 'cluster mode, 2 nodes; publishers spread over both, consumer on the second', ...two },
          ratioTwoNodesToBaseline: Number((two.deliveredPerSecond / single.deliveredPerSecond).toFixed(3)),
        },
        null,
        2,
      ),
    );
  } finally {
    for (const s of started) await s.stop().catch(() => undefined);
    pg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
