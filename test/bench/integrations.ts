/**
 * `npm run bench:integrations`: uplinks from a network server end to end,
 * beside the same uplinks published over MQTT, in the same run.
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform
 *   runs as its own process (`api/main.ts`); the load and the consumer run here.
 * - `DEVICES` devices per path, each decoding raw frames with the climate
 *   decoder, each with an `mqtt` channel to one consumer that counts what
 *   reaches the output topics.
 * - `webhook`: ChirpStack's HTTP integration `up` events (the JSON marshaler's
 *   shape, base64 frame, two gateways' rxInfo) POSTed to the connector's
 *   webhook with `WINDOW` requests in flight; a 200 means stored.
 * - `mqtt`: the same frames as `{encodedData}` published at QoS 1 on the
 *   devices' reserved topics with `WINDOW` messages in flight per connection;
 *   a PUBACK means stored.
 * - Phases alternate (mqtt, webhook, mqtt, …); each reports accepted/s, and
 *   the messages that reached the output topics per second (end to end: the
 *   device read model and the output topic updated).
 * Aim: webhooks end to end at least 0.7 of MQTT.
 */
import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { climateHex, climateSensor } from '../sandbox/fixtures.js';
import { connectMqtt, cpuMeter, reserveTopics, startPlatformProcess, type PlatformProcess } from './processes.js';
import { HttpLane } from './httpLane.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ROUNDS = 2;
const DEVICES = 200;
const WINDOW = 64;
const CONNECTIONS = 4;

const frames = Array.from({ length: 64 }, (_u, i) => Buffer.from(climateHex(15 + i / 8, 30 + i / 2, 2900 + i), 'hex'));
const euiOf = (i: number) => `70b3d57ed005${i.toString(16).padStart(4, '0')}`;

const connect = (port: number, username: string, password: string) => connectMqtt(port, { username, password });

interface Phase {
  acceptedPerSecond: number;
  deliveredPerSecond: number;
  lost: number;
  /** CPU time the platform process spent per accepted message (user + system), in microseconds. */
  platformCpuMicrosPerMessage: number;
  /** The same for PostgreSQL (every process of the cluster) and for this process, the load generator and consumer. */
  postgresCpuMicrosPerMessage: number;
  loadGeneratorCpuMicrosPerMessage: number;
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-integrations-'));
  const cluster = startPrivateCluster(dir, 'bench');
  let child: ChildProcess | null = null;
  try {
    const platform: PlatformProcess = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'));
    child = platform.child;
    const { call } = platform;
    const me = (await call<{ id: string }[]>('GET', '/api/users?username=admin'))[0]!.id;
    await call('POST', '/api/translators', { name: 'bench-climate', version: '1.0.0', match: {}, spec: climateSensor.spec, code: climateSensor.code });
    const preferences = [{ name: 'bench-climate', version: '1.0.0', upgradePolicy: 'none' }];

    // The webhook path: a ChirpStack connector and its devices.
    const connector = await call<{ _id: string; webhookSecret: string }>('POST', '/api/connectors', { name: 'bench', integration: 'ChirpStack', chirpstack: { url: 'http://127.0.0.1:9', apiToken: 'unused' } });
    const webhookDevices: string[] = [];
    for (let i = 0; i < DEVICES; i++) {
      const d = await call('POST', '/api/iotnodes', { name: `bench-webhook-${i}`, connector: connector._id, devEui: euiOf(i), translatorPreferences: preferences });
      webhookDevices.push(d._id);
    }
    // The MQTT path: reserved topics over a few credentials sets; devices made by their first message, then given the decoder.
    const sets = await reserveTopics(call, 'mqtt', DEVICES, CONNECTIONS);
    const clients = await Promise.all(sets.map((s) => connect(platform.ports.mqtt!, s.username, s.password)));
    await Promise.all(clients.flatMap((client, c) => sets[c]!.topics.map((topic) => client.publishAsync(topic, '{"hello":true}', { qos: 1 }))));
    let mqttDevices: { _id: string }[] = [];
    while (mqttDevices.length < DEVICES) {
      mqttDevices = await call<{ _id: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id&filter[name]=${encodeURIComponent('bench/mqtt-')}`);
      if (mqttDevices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
    }
    for (const d of mqttDevices) await call('PUT', `/api/iotnodes/${d._id}`, { translatorPreferences: preferences });
    // One consumer: every device's changes on the admin's output topic.
    for (const id of [...webhookDevices, ...mqttDevices.map((d) => d._id)]) await call('POST', '/api/channels', { iotnode: id, mqtt: { type: 'keycloakUser', recipient: me } });
    const consumer = await connect(platform.ports.mqtt!, me, platform.token);
    let delivered = 0;
    consumer.on('message', (_topic, payload) => {
      if (payload.includes('"temperature"')) delivered++;
    });
    await consumer.subscribeAsync(`svc/output/v2/${me}/#`, { qos: 1 });

    // One kept-alive connection per request in flight, as a network server's sender keeps them; a lean
    // client (httpLane.ts), because node:http's would cost this shared machine as much CPU as the platform's side.
    const lanes = Array.from({ length: WINDOW }, () => new HttpLane(platform.ports.http!));
    const path = `/api/integrations/chirpstack/${connector._id}?event=up`;
    const headers = `content-type: application/json\r\nauthorization: Bearer ${connector.webhookSecret}\r\n`;
    const upEvent = (i: number, n: number) =>
      JSON.stringify({
        deduplicationId: randomUUID(),
        time: new Date().toISOString(),
        deviceInfo: { tenantName: 'bench', applicationName: 'bench', deviceName: `node-${i}`, devEui: euiOf(i) },
        devAddr: '01e6e3f2',
        dr: 5,
        fCnt: n,
        fPort: 1,
        data: frames[n % frames.length]!.toString('base64'),
        rxInfo: [
          { gatewayId: '0016c001ff10a235', rssi: -57, snr: 9.5 },
          { gatewayId: '0016c001ff10b7f1', rssi: -93, snr: 2.25 },
        ],
        txInfo: { frequency: 868300000, modulation: { lora: { bandwidth: 125000, spreadingFactor: 7 } } },
      });
    const mqttPayloads = frames.map((f) => JSON.stringify({ encodedData: { hexEncoded: f.toString('hex'), port: 1 } }));

    /** Sends for SECONDS, then waits until the output topics caught up (or 30 s). */
    const measure = async (seconds: number, send: (until: number) => Promise<number>, phase?: string): Promise<Phase> => {
      const before = delivered;
      const meter = cpuMeter(child!.pid!, join(dir, 'pg'));
      const started = Date.now();
      const accepted = await send(started + seconds * 1000);
      const sendSeconds = (Date.now() - started) / 1000;
      const drainUntil = Date.now() + 30_000;
      while (delivered - before < accepted && Date.now() < drainUntil) await new Promise((r) => setTimeout(r, 20));
      const total = (Date.now() - started) / 1000;
      const cpu = meter.per(accepted, phase);
      return {
        acceptedPerSecond: Math.round(accepted / sendSeconds),
        deliveredPerSecond: Math.round((delivered - before) / total),
        lost: Math.max(0, accepted - (delivered - before)),
        platformCpuMicrosPerMessage: cpu.server,
        postgresCpuMicrosPerMessage: cpu.postgres ?? 0,
        loadGeneratorCpuMicrosPerMessage: cpu.loadGenerator,
      };
    };
    const viaWebhook = (seconds = SECONDS, phase?: string) => measure(seconds, async (until) => {
      let accepted = 0;
      let n = 0;
      const lane = async (http: HttpLane) => {
        while (Date.now() < until) {
          const k = n++;
          const status = await http.send('POST', path, headers, upEvent(k % DEVICES, k));
          if (status !== 200) throw new Error(`webhook answered ${status}`);
          accepted++;
        }
      };
      await Promise.all(lanes.map(lane));
      return accepted;
    }, phase);
    const viaMqtt = (seconds = SECONDS, phase?: string) => measure(seconds, async (until) => {
      let accepted = 0;
      await Promise.all(
        clients.map(async (client, c) => {
          let next = c;
          const lane = async () => {
            while (Date.now() < until) {
              const i = next++;
              await client.publishAsync(sets[c]!.topics[i % sets[c]!.topics.length]!, mqttPayloads[i % mqttPayloads.length]!, { qos: 1 });
              accepted++;
            }
          };
          await Promise.all(Array.from({ length: WINDOW / CONNECTIONS }, lane));
        }),
      );
      return accepted;
    }, phase);
    // Warm both paths (translator contexts, device documents) outside the measurement.
    await viaMqtt(2);
    await viaWebhook(2);
    // BENCH_ONLY=webhook|mqtt runs one path (to profile it with BENCH_PROFILE); the ratio then means nothing.
    const only = process.env.BENCH_ONLY;
    const runs: { mqtt: Phase[]; webhook: Phase[] } = { mqtt: [], webhook: [] };
    for (let round = 0; round < ROUNDS; round++) {
      if (only !== 'webhook') runs.mqtt.push(await viaMqtt(SECONDS, 'mqtt'));
      if (only !== 'mqtt') runs.webhook.push(await viaWebhook(SECONDS, 'webhook'));
    }
    await Promise.all([...clients, consumer].map((c) => c.endAsync()));
    for (const lane of lanes) lane.close();
    const mean = (xs: number[]) => (xs.length ? Math.round(xs.reduce((a, b) => a + b, 0) / xs.length) : 0);
    const summary = (phases: Phase[]) => ({
      acceptedPerSecond: mean(phases.map((p) => p.acceptedPerSecond)),
      endToEndPerSecond: mean(phases.map((p) => p.deliveredPerSecond)),
      lost: phases.reduce((a, p) => a + p.lost, 0),
      platformCpuMicrosPerMessage: mean(phases.map((p) => p.platformCpuMicrosPerMessage)),
      postgresCpuMicrosPerMessage: mean(phases.map((p) => p.postgresCpuMicrosPerMessage)),
      loadGeneratorCpuMicrosPerMessage: mean(phases.map((p) => p.loadGeneratorCpuMicrosPerMessage)),
    });
    const mqttFigures = summary(runs.mqtt);
    const webhookFigures = summary(runs.webhook);
    const ratio = Math.round((webhookFigures.endToEndPerSecond / mqttFigures.endToEndPerSecond) * 1000) / 1000;
    console.log(
      JSON.stringify(
        {
          benchmark: 'integrations',
          seconds: SECONDS,
          rounds: ROUNDS,
          devicesPerPath: DEVICES,
          inFlight: WINDOW,
          decoder: 'climate (5-byte frames)',
          chirpstackWebhook: webhookFigures,
          baselineMqtt: mqttFigures,
          ratioWebhookToMqtt: ratio,
          aim: { ratioAtLeast: 0.7, met: ratio >= 0.7 },
        },
        null,
        2,
      ),
    );
  } finally {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 2000));
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
