/**
 * `npm run bench:soak`: a long run at a steady rate, to see whether the
 * platform holds its memory, its event loop and its lag over time. Not part
 * of `npm test`. Prints one JSON object.
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform as
 *   its own process with metrics on (`METRICS_TOKEN`), read from `/metrics`.
 * - `SOAK_DEVICES` devices (1,000) on reserved topics over 10 credentials sets,
 *   published at `SOAK_RATE` messages a second (2,000) in total, QoS 1, for
 *   `SOAK_MINUTES` (20).
 * - Alongside: a consumer of every change on its output topics (an mqtt
 *   channel on a group of all devices), an HTTP channel on a group of a tenth
 *   of the devices posting to a receiver here, and REST reads (one device, a
 *   page of devices) at `SOAK_READS` a second (20).
 * - Samples every 10 s: RSS and heap used, the event loop's delay p99 over the
 *   last interval, the largest subscriber lag. Heap used is also given as its
 *   floor near each point (the least of the samples within a minute), since
 *   a single sample lands anywhere on the collector's saw-tooth. Start is the first sample after
 *   a minute of warm-up (or a tenth of the run if shorter), middle the sample
 *   at half time, end the last sample.
 * - Lost: messages acknowledged (PUBACK) that the consumer, or the HTTP
 *   receiver for its devices, never got after a drain of up to 60 s.
 */
import type { ChildProcess } from 'node:child_process';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectMqtt, reserveTopics, startPlatformProcess } from './processes.js';
import { startPrivateCluster } from '../../migrations/cluster.js';

const MINUTES = Number(process.env.SOAK_MINUTES ?? 20);
const RATE = Number(process.env.SOAK_RATE ?? 2000);
const DEVICES = Number(process.env.SOAK_DEVICES ?? 1000);
const READS = Number(process.env.SOAK_READS ?? 20);
const CONNECTIONS = 10;
const SAMPLE_MS = 10_000;
const TICK_MS = 50;
const METRICS_TOKEN = 'soak-metrics-token-0123456789';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const connectClient = connectMqtt;
const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? 0;
};

interface Sample {
  atSeconds: number;
  rssMb: number;
  heapUsedMb: number;
  eventLoopDelayP99Ms: number;
  /** The largest lag of any subscriber of the event log, in events and seconds. */
  lagEvents: number;
  lagSeconds: number;
  acked: number;
}

/** Prometheus text to the values of the named metrics (summed over labels, or the max for lags). */
function readMetrics(text: string): Omit<Sample, 'atSeconds' | 'acked'> {
  const values = new Map<string, number[]>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([^ ]+)/.exec(line);
    if (!m) continue;
    const list = values.get(m[1]!) ?? [];
    list.push(Number(m[3]));
    values.set(m[1]!, list);
  }
  const one = (name: string) => {
    const v = values.get(name);
    if (!v) throw new Error(`/metrics has no ${name}`);
    return v[0]!;
  };
  const max = (name: string) => Math.max(0, ...(values.get(name) ?? []));
  return {
    rssMb: Math.round(one('process_resident_memory_bytes') / 2 ** 20),
    heapUsedMb: Math.round(one('nodejs_heap_size_used_bytes') / 2 ** 20),
    eventLoopDelayP99Ms: Number((one('nodejs_eventloop_lag_p99_seconds') * 1000).toFixed(1)),
    lagEvents: max('platform_subscriber_lag_events'),
    lagSeconds: Number(max('platform_subscriber_lag_seconds').toFixed(2)),
  };
}

/** An HTTP channel's receiver: records each delivered message's key. */
async function receiver(): Promise<{ url: string; got: Set<string>; posts: () => number; close: () => Promise<void> }> {
  const got = new Set<string>();
  let posts = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      posts++;
      try {
        const body = JSON.parse(text) as { diff?: { seq?: string } };
        if (body.diff?.seq) got.add(body.diff.seq);
      } catch {
        // not a channel message
      }
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/soak`,
    got,
    posts: () => posts,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-soak-'));
  const cluster = startPrivateCluster(dir, 'soak');
  const children: ChildProcess[] = [];
  try {
    const platform = await startPlatformProcess(cluster.url('soak'), join(dir, 'data'), { METRICS_TOKEN, LOG_LEVEL: 'warn' });
    children.push(platform.child);
    const call = platform.call;
    const base = `http://127.0.0.1:${platform.ports.http}`;
    const mqttPort = platform.ports.mqtt!;

    // ---- given: devices, a consumer, an HTTP channel ----
    const publishers = await reserveTopics(call, 'device', DEVICES, CONNECTIONS, 'soak');
    const warm = await Promise.all(publishers.map((p) => connectClient(mqttPort, { username: p.username, password: p.password })));
    await Promise.all(warm.flatMap((c, i) => publishers[i]!.topics.map((topic) => c.publishAsync(topic, JSON.stringify({ warm: true }), { qos: 1 }))));
    await Promise.all(warm.map((c) => c.endAsync()));
    let devices: { _id: string; name: string }[] = [];
    for (let tries = 0; devices.length < DEVICES && tries < 200; tries++) {
      devices = await call<{ _id: string; name: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id%2Cname&filter[name]=${encodeURIComponent('soak/device-')}`);
      if (devices.length < DEVICES) await sleep(200);
    }
    if (devices.length < DEVICES) throw new Error(`only ${devices.length} of ${DEVICES} devices were created`);
    const consumerSet = await call('POST', '/api/basic-credentials-sets', { username: 'soak-consumer', password: 'soak-consumer-password' });
    const all = await call('POST', '/api/devicegroups', { name: 'soak all', devices: devices.map((d) => d._id) });
    await call('POST', '/api/channels', { deviceGroup: all._id, mqtt: { type: 'basicCredentialsSet', recipient: consumerSet._id } });
    // The HTTP channel's devices: every tenth, by the number in its name.
    const hooked = new Set(devices.filter((d) => Number(/device-(\d+)$/.exec(d.name)?.[1]) % 10 === 0).map((d) => d.name));
    const http = await receiver();
    const tenth = await call('POST', '/api/devicegroups', { name: 'soak tenth', devices: devices.filter((d) => hooked.has(d.name)).map((d) => d._id) });
    await call('POST', '/api/channels', { deviceGroup: tenth._id, http: { url: http.url } });

    const consumer = await connectClient(mqttPort, { username: 'soak-consumer', password: 'soak-consumer-password', clientId: 'soak-consumer' });
    await consumer.subscribeAsync(`svc/output/v2/${consumerSet._id}/#`, { qos: 1 });
    const delivered = new Set<string>();
    const latencies: number[] = [];
    consumer.on('message', (_topic, payload) => {
      const m = JSON.parse(payload.toString()) as { diff?: { seq?: string; t?: number } };
      if (!m.diff?.seq || delivered.has(m.diff.seq)) return;
      delivered.add(m.diff.seq);
      // `t` is in the diff only when it changed: two reports of a device in one millisecond give one latency.
      if (typeof m.diff.t === 'number' && latencies.length < 5_000_000) latencies.push(Date.now() - m.diff.t);
    });

    // ---- when: publish at RATE for MINUTES, with REST reads alongside ----
    const clients = await Promise.all(publishers.map((p, i) => connectClient(mqttPort, { username: p.username, password: p.password, clientId: `soak-pub-${i}` })));
    const acked = new Set<string>();
    let published = 0;
    let failedPublishes = 0;
    const started = Date.now();
    const until = started + MINUTES * 60_000;
    let seq = 0;
    const perTick = RATE * (TICK_MS / 1000);
    let owed = 0;
    let next = 0;
    const ticker = setInterval(() => {
      if (Date.now() >= until) return;
      // The rate is kept on average: a late tick publishes what the schedule owes.
      owed += perTick;
      for (; owed >= 1; owed--) {
        const c = next++ % CONNECTIONS;
        const topics = publishers[c]!.topics;
        const topic = topics[Math.floor(next / CONNECTIONS) % topics.length]!;
        const key = `${topic.slice(topic.lastIndexOf('-') + 1)}#${++seq}`;
        published++;
        clients[c]!.publishAsync(topic, JSON.stringify({ seq: key, t: Date.now() }), { qos: 1 }).then(
          () => acked.add(key),
          () => failedPublishes++,
        );
      }
    }, TICK_MS);

    const reads = { done: 0, failed: 0, latencies: [] as number[] };
    const reader = (async () => {
      while (Date.now() < until) {
        const t0 = Date.now();
        const device = devices[Math.floor(Math.random() * devices.length)]!;
        const path = reads.done % 2 ? `/api/iotnodes/${device._id}` : `/api/iotnodes?limit=100&offset=${Math.floor(Math.random() * 9) * 100}`;
        try {
          const res = await fetch(base + path, { headers: { authorization: `Bearer ${platform.token}` } });
          await res.arrayBuffer();
          if (res.status === 200) reads.done++;
          else reads.failed++;
        } catch {
          reads.failed++;
        }
        reads.latencies.push(Date.now() - t0);
        await sleep(Math.max(0, 1000 / READS - (Date.now() - t0)));
      }
    })();

    const samples: Sample[] = [];
    const sample = async () => {
      const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
      samples.push({ atSeconds: Math.round((Date.now() - started) / 1000), ...readMetrics(await res.text()), acked: acked.size });
    };
    await sample();
    while (Date.now() < until) {
      await sleep(Math.min(SAMPLE_MS, until - Date.now()));
      await sample();
      const last = samples.at(-1)!;
      process.stderr.write(`soak ${last.atSeconds}s: ${last.acked} acked, rss ${last.rssMb} MB, heap ${last.heapUsedMb} MB, loop p99 ${last.eventLoopDelayP99Ms} ms, lag ${last.lagEvents} events / ${last.lagSeconds} s\n`);
    }
    clearInterval(ticker);
    await reader;

    // ---- then: drain, and count what never arrived ----
    const expectedHttp = () => [...acked].filter((k) => Number(k.slice(0, k.indexOf('#'))) % 10 === 0);
    const drainUntil = Date.now() + 60_000;
    while (Date.now() < drainUntil && (acked.size + failedPublishes < published || [...acked].some((k) => !delivered.has(k)) || expectedHttp().some((k) => !http.got.has(k)))) await sleep(250);
    await sample();
    await Promise.all(clients.map((c) => c.endAsync()));
    await consumer.endAsync();
    await http.close();

    const warmUp = Math.min(60, (MINUTES * 60) / 10);
    const runSamples = samples.slice(0, -1);
    const start = runSamples.find((s) => s.atSeconds >= warmUp) ?? runSamples[0]!;
    const middle = runSamples.reduce((best, s) => (Math.abs(s.atSeconds - (MINUTES * 30)) < Math.abs(best.atSeconds - (MINUTES * 30)) ? s : best));
    const end = runSamples.at(-1)!;
    // Heap used is a saw-tooth between collections: its floor near a point (within a minute, or a tenth of the run) is what grows with a leak.
    const near = Math.min(60, (MINUTES * 60) / 10);
    const heapFloor = (at: Sample) => Math.min(...runSamples.filter((s) => Math.abs(s.atSeconds - at.atSeconds) <= near).map((s) => s.heapUsedMb));
    const loopP99 = Math.max(...runSamples.filter((s) => s.atSeconds >= warmUp).map((s) => s.eventLoopDelayP99Ms));
    const lost = [...acked].filter((k) => !delivered.has(k)).length;
    const httpLost = expectedHttp().filter((k) => !http.got.has(k)).length;
    const elapsed = (Math.min(Date.now(), until) - started) / 1000;
    console.log(
      JSON.stringify(
        {
          benchmark: 'soak',
          minutes: MINUTES,
          devices: DEVICES,
          targetPerSecond: RATE,
          durability: 'on (fsync, synchronous_commit)',
          published,
          acked: acked.size,
          ackedPerSecond: Math.round(acked.size / elapsed),
          failedPublishes,
          lost,
          httpChannel: { devices: hooked.size, expected: expectedHttp().length, received: http.got.size, posts: http.posts(), lost: httpLost },
          restReads: { done: reads.done, failed: reads.failed, p50Ms: percentile(reads.latencies, 0.5), p99Ms: percentile(reads.latencies, 0.99) },
          deliveryLatency: { p50Ms: percentile(latencies, 0.5), p99Ms: percentile(latencies, 0.99) },
          memory: {
            start: { atSeconds: start.atSeconds, rssMb: start.rssMb, heapUsedMb: start.heapUsedMb, heapFloorMb: heapFloor(start) },
            middle: { atSeconds: middle.atSeconds, rssMb: middle.rssMb, heapUsedMb: middle.heapUsedMb, heapFloorMb: heapFloor(middle) },
            end: { atSeconds: end.atSeconds, rssMb: end.rssMb, heapUsedMb: end.heapUsedMb, heapFloorMb: heapFloor(end) },
            // The aim's measure: the end against the middle (1.0 is flat; the aim is at most 1.1).
            rssEndToMiddle: Number((end.rssMb / middle.rssMb).toFixed(3)),
            heapFloorEndToMiddle: Number((heapFloor(end) / heapFloor(middle)).toFixed(3)),
          },
          eventLoopDelayP99Ms: { worstInterval: loopP99, start: start.eventLoopDelayP99Ms, middle: middle.eventLoopDelayP99Ms, end: end.eventLoopDelayP99Ms },
          projectionLag: { worstEvents: Math.max(...runSamples.map((s) => s.lagEvents)), worstSeconds: Math.max(...runSamples.map((s) => s.lagSeconds)), afterDrain: { events: samples.at(-1)!.lagEvents, seconds: samples.at(-1)!.lagSeconds } },
          aims: {
            memoryFlat: end.rssMb <= middle.rssMb * 1.1 && heapFloor(end) <= heapFloor(middle) * 1.1,
            eventLoopP99Under50Ms: loopP99 < 50,
            noneLost: lost === 0 && httpLost === 0 && failedPublishes === 0,
          },
          samples,
        },
        null,
        2,
      ),
    );
    await platform.stop();
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
