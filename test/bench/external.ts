/**
 * Generic connector with an external broker: how fast device messages reach
 * the event store when the platform takes them from a Mosquitto it is a
 * client of, beside the same messages published on the platform's own broker,
 * in the same run. Prints one JSON object.
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform
 *   runs as its own process (`api/main.ts`); Mosquitto (Debian's package) and
 *   the publishers run beside it.
 * - `MESSAGES` reports over `DEVICES` topics, published at QoS 1 with `WINDOW`
 *   in flight. The rate is stored reports per second, from the first publish
 *   until the last report is in the event store: for the external broker a
 *   publisher's PUBACK comes from Mosquitto, not from the platform, so the
 *   store is counted. Mosquitto's queue for the platform is unbounded here, so
 *   a burst is never dropped by the broker.
 * - Rounds alternate (external, own, external, own) so drift of the machine
 *   hits both alike; each reports its mean.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import mqtt, { type MqttClient } from 'mqtt';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { startPlatformProcess } from './processes.js';
import { Mosquitto } from '../support/mosquitto.js';

const MESSAGES = Number(process.env.BENCH_EXTERNAL_MESSAGES ?? 20_000);
const DEVICES = 200;
const WINDOW = 64;
const ROUNDS = 2;

async function publishAll(client: MqttClient, topic: (i: number) => string, round: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < MESSAGES; i = next++) await client.publishAsync(topic(i % DEVICES), JSON.stringify({ round, n: i, temperature: 20 + (i % 50) / 10 }), { qos: 1 });
  };
  await Promise.all(Array.from({ length: WINDOW }, lane));
}

async function reports(db: pg.Pool, actor: string): Promise<number> {
  const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported' AND metadata->>'actor' = $1`, [actor]);
  return Number(rows[0]!.n);
}

/** Publishes a round and waits until every report of it is stored; stored reports per second. */
async function round(db: pg.Pool, client: MqttClient, actor: string, topic: (i: number) => string, n: number): Promise<number> {
  const before = await reports(db, actor);
  const started = Date.now();
  await publishAll(client, topic, n);
  for (;;) {
    if ((await reports(db, actor)) >= before + MESSAGES) break;
    if (Date.now() - started > 300_000) throw new Error(`${actor}: not every report was stored within 300 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return MESSAGES / ((Date.now() - started) / 1000);
}

const connect = (url: string, username: string, password: string) => mqtt.connectAsync(url, { username, password, protocolVersion: 4, reconnectPeriod: 0 });

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-external-'));
  const cluster = startPrivateCluster(dir, 'bench');
  const broker = await new Mosquitto({ platform: 'bench-platform-password', gateway: 'bench-gateway-password' }, ['max_queued_messages 0']).start();
  const db = new pg.Pool({ connectionString: cluster.url('bench'), max: 2 });
  let child: ChildProcess | null = null;
  try {
    const platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'));
    child = platform.child;
    const connector = await platform.call('POST', '/api/connectors', {
      name: 'bench broker',
      integration: 'Generic',
      mqttServer: { host: broker.host, port: 1883, protocol: 'mqtt', username: 'platform', password: 'bench-platform-password' },
      uplink: { topic: 'bench/#' },
      downlink: { topic: 'bench-down' },
    });
    const set = await platform.call('POST', '/api/basic-credentials-sets', { username: 'bench-own', password: 'bench-own-password' });
    for (let d = 0; d < DEVICES; d++) await platform.call('POST', '/api/reserved-mqtt-topics', { topic: `svc/generic/v2/bench/d${d}`, basicCredentialsSetId: set._id });
    const gateway = await connect(broker.url, 'gateway', 'bench-gateway-password');
    const own = await connect(`mqtt://127.0.0.1:${platform.ports.mqtt}`, 'bench-own', 'bench-own-password');
    const variants = {
      external: { client: gateway, actor: `connector:${connector._id}`, topic: (d: number) => `bench/d${d}` },
      own: { client: own, actor: `credentials:${set._id}`, topic: (d: number) => `svc/generic/v2/bench/d${d}` },
    };
    // The first messages create the devices; not measured.
    for (const v of Object.values(variants)) {
      await Promise.all(Array.from({ length: DEVICES }, (_, d) => v.client.publishAsync(v.topic(d), '{"hello":true}', { qos: 1 })));
      for (let tries = 0; (await reports(db, v.actor)) < DEVICES && tries < 500; tries++) await new Promise((r) => setTimeout(r, 20));
    }
    const samples = { external: [] as number[], own: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      for (const [name, v] of Object.entries(variants) as [keyof typeof variants, (typeof variants)['own']][]) samples[name].push(await round(db, v.client, v.actor, v.topic, r));
    }
    await Promise.all([gateway.endAsync(), own.endAsync()]);
    const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
    const external = mean(samples.external);
    const ownBroker = mean(samples.own);
    console.log(
      JSON.stringify(
        {
          benchmark: 'generic external broker ingest',
          messagesPerRound: MESSAGES,
          rounds: ROUNDS,
          devices: DEVICES,
          publisherInFlight: WINDOW,
          storedPerSecond: { externalBroker: external, ownBroker },
          ratioExternalToOwn: Math.round((external / ownBroker) * 100) / 100,
          note: "external: Mosquitto's in-flight window toward the platform (max_inflight_messages, 20 by default) bounds the messages awaiting storage",
        },
        null,
        2,
      ),
    );
  } finally {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child!.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await db.end();
    await broker.dispose();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
