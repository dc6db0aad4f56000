/**
 * Ingest throughput with a translator attached, against ingest of the same
 * messages without one, in the same run (part of `npm run bench:translators`).
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform
 *   runs as its own process (`api/main.ts`), the publishers run here.
 * - `DEVICES` devices per variant, each on its own reserved topic, over
 *   `CONNECTIONS` credentials sets; one QoS 1 connection per set keeping
 *   `WINDOW` messages in flight. A PUBACK means the report is stored (decoded
 *   first when a translator is attached), so acknowledged messages per second
 *   is the ingest rate.
 * - Every device gets raw uplinks `{encodedData: {hexEncoded, port}}`:
 *   `plain` devices store them as they come, `decoder` devices run the climate
 *   decoder, `chain` devices the decoder plus a chained analytics translator,
 *   `codec` devices a device-repository codec (Elsys, `decodeUplink`) through
 *   its field map, on Elsys frames (16 bytes, against the climate decoder's 5).
 * - `decodedPlain` devices have no translator and get the Elsys frame together
 *   with the six fields the codec decodes from it, so they store the very
 *   report the `codec` devices store: `codec` against it is the translator's
 *   own cost; `codec` against `plain` also counts storing six more fields
 *   (history rows, larger events and output messages).
 * - Phases alternate, in an order reversed every other round (plain, decoder,
 *   chain, codec, decodedPlain, then decodedPlain, codec, … plain), so each
 *   variant's phases sit at the same mean time: a machine that drifts, or a
 *   store that grows slower as the run adds events, hits every variant alike.
 *   `BENCH_ROUNDS` rounds (default 4); each variant reports its mean.
 * - Before each phase every subscriber of the log (the projections, the
 *   reactors) has caught up with the one before, so no phase pays for the
 *   read models of another; a phase's CPU time counts until its own read
 *   models are done (`catchUpMsAfterPhase`: how long that took after its
 *   last PUBACK).
 */
import type { ChildProcess } from 'node:child_process';
import { caughtUp, connectMqtt, cpuMeter, startPlatformProcess, type CpuPerMessage } from './processes.js';
import pg from 'pg';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { climateHex, climateSensor, dailyTemperature } from '../sandbox/fixtures.js';
import { elsysErsCo2 } from '../translators/codecs/index.js';
import { compileFieldMap } from '../../sandbox/index.js';

const SECONDS = Number(process.env.BENCH_INGEST_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONNECTIONS = 4;
const DEVICES = 200;
const WINDOW = 64;
const ALL_VARIANTS = ['plain', 'decoder', 'chain', 'codec', 'decodedPlain'] as const;
type Variant = (typeof ALL_VARIANTS)[number];
/** `BENCH_VARIANTS=plain,codec` measures only those (a profile of one path); ratios with a variant left out are 0. */
const VARIANTS: readonly Variant[] = process.env.BENCH_VARIANTS
  ? ALL_VARIANTS.filter((v) => process.env.BENCH_VARIANTS!.split(',').includes(v))
  : ALL_VARIANTS;

export interface IngestFigures {
  seconds: number;
  rounds: number;
  devicesPerVariant: number;
  connections: number;
  inFlightPerConnection: number;
  acceptedPerSecond: Record<Variant, number>;
  /** Each phase's rate, per variant, in the order run. */
  samples: Partial<Record<Variant, number[]>>;
  /** How long the log's subscribers (projections, reactors) took to handle each phase after its last acknowledgement. */
  catchUpMsAfterPhase: Partial<Record<Variant, number[]>>;
  /** CPU time per accepted message of the platform process and of PostgreSQL, over each variant's measured phases. */
  cpuMicrosPerMessage: Partial<Record<Variant, { platform: number; postgres: number }>>;
  /** Messages acknowledged per variant over the whole run, warm-up included. */
  sent: Partial<Record<Variant, number>>;
  ratioDecoderToPlain: number;
  ratioChainToPlain: number;
  ratioCodecToPlain: number;
  ratioCodecToDecodedPlain: number;
  /** The same ratios within each round, to tell a steady figure from one a single phase made. */
  ratiosPerRound: { decoderToPlain: number[]; codecToPlain: number[] };
  aim: { ratioAtLeast: number; met: boolean; codecRatioAtLeast: number; codecMet: boolean };
  decodedSample: Record<string, unknown>;
}

const connect = (port: number, username: string, password: string) => connectMqtt(port, { username, password });

const METRICS_TOKEN = 'bench-translators-metrics-token-0123456789';
const EVERY_SUBSCRIBER = /[^"]+/;

const climateUplinks = Array.from({ length: 64 }, (_u, i) => JSON.stringify({ encodedData: { hexEncoded: climateHex(15 + i / 8, 30 + i / 2, 2900 + i), port: 1 } }));
/** Elsys frames: temperature, humidity, light, motion, CO2 and supply voltage, values varying. */
const elsysFrames = Array.from({ length: 64 }, (_u, i) => {
  const b = Buffer.from([0x01, 0, 0, 0x02, 30 + (i % 50), 0x04, 0, 0, 0x05, i % 20, 0x06, 0, 0, 0x07, 0, 0]);
  b.writeInt16BE(200 + i, 1);
  b.writeUInt16BE(100 + i, 6);
  b.writeUInt16BE(400 + i * 3, 11);
  b.writeUInt16BE(3000 + i, 14);
  return b;
});
const elsysUplinks = elsysFrames.map((b) => JSON.stringify({ encodedData: { hexEncoded: b.toString('hex'), port: 5 } }));
/** The same frames with the fields the codec decodes from them, decoded here in Node. */
const elsysDecoded = (() => {
  const decodeUplink = new Function(`${elsysErsCo2.codec}\nreturn decodeUplink;`)() as (input: { bytes: number[]; fPort: number }) => { data: Record<string, unknown> };
  const map = compileFieldMap(elsysErsCo2.fieldMap, elsysErsCo2.spec, 'reject');
  return elsysFrames.map((b) =>
    JSON.stringify({ encodedData: { hexEncoded: b.toString('hex'), port: 5 }, ...map(decodeUplink({ bytes: [...b], fPort: 5 }).data).result }),
  );
})();

/** Publishes to `topics` (one list per connection) for SECONDS; acknowledged messages per second and their count. */
async function phase(clients: MqttClient[], topics: string[][], uplinks: string[] = climateUplinks): Promise<{ rate: number; acked: number }> {
  const started = Date.now();
  const until = started + SECONDS * 1000;
  let acked = 0;
  await Promise.all(
    clients.map(async (client, c) => {
      let next = c;
      const lane = async () => {
        while (Date.now() < until) {
          const i = next++;
          await client.publishAsync(topics[c]![i % topics[c]!.length]!, uplinks[i % uplinks.length]!, { qos: 1 });
          acked++;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  return { rate: acked / ((Date.now() - started) / 1000), acked };
}

export async function measureIngest(): Promise<IngestFigures> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-translator-ingest-'));
  const cluster = startPrivateCluster(dir, 'bench');
  let child: ChildProcess | null = null;
  let db: pg.Pool | null = null;
  try {
    const platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'), { METRICS_TOKEN });
    db = new pg.Pool({ connectionString: cluster.url('bench'), max: 1 });
    /**
     * Every subscriber of the log has handled the phase before it, so a phase never pays for the read models
     * of the one before; the milliseconds that took. (No checkpoint between phases: one would make each phase
     * log every page it touches whole, a cost per page, not per message, that falls hardest on the slowest
     * variant; the server's own checkpoints fall where they fall, as in production.)
     */
    const settle = () => caughtUp(platform.ports.http!, METRICS_TOKEN, EVERY_SUBSCRIBER, db!);
    child = platform.child;
    const call = platform.call;
    await call('POST', '/api/translators', { name: 'bench-climate', version: '1.0.0', match: {}, spec: climateSensor.spec, code: climateSensor.code });
    await call('POST', '/api/translators', { name: 'bench-elsys', version: '1.0.0', match: {}, spec: elsysErsCo2.spec, fieldMap: elsysErsCo2.fieldMap, code: elsysErsCo2.codec });
    await call('POST', '/api/translators', {
      name: 'bench-daily',
      version: '1.0.0',
      match: {},
      parameters: { highAlarmAbove: { type: 'number', description: 'alarm limit', default: 24 } },
      spec: dailyTemperature.spec,
      code: dailyTemperature.code,
    });
    const preferences: Record<Variant, unknown> = {
      plain: null,
      decoder: [{ name: 'bench-climate', version: '1.0.0', upgradePolicy: 'none' }],
      chain: [
        { name: 'bench-climate', version: '1.0.0', upgradePolicy: 'none' },
        { name: 'bench-daily', version: '1.0.0', upgradePolicy: 'none' },
      ],
      codec: [{ name: 'bench-elsys', version: '1.0.0', upgradePolicy: 'none' }],
      decodedPlain: null,
    };
    const uplinksOf = (variant: Variant) => (variant === 'codec' ? elsysUplinks : variant === 'decodedPlain' ? elsysDecoded : climateUplinks);

    // topics[variant][connection] = that connection's topics of the variant
    const topics = Object.fromEntries(VARIANTS.map((v) => [v, Array.from({ length: CONNECTIONS }, () => [] as string[])])) as Record<Variant, string[][]>;
    const sets: { username: string; password: string }[] = [];
    for (let c = 0; c < CONNECTIONS; c++) {
      const username = `bench-${c}`;
      const password = `bench-password-${c}`;
      const set = await call('POST', '/api/basic-credentials-sets', { username, password });
      sets.push({ username, password });
      for (const variant of VARIANTS) {
        for (let d = c; d < DEVICES; d += CONNECTIONS) {
          const topic = `svc/generic/v2/bench/${variant}-${d}`;
          await call('POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set._id });
          topics[variant][c]!.push(topic);
        }
      }
    }
    const clients = await Promise.all(sets.map((s) => connect(platform.ports.mqtt!, s.username, s.password)));
    // First messages create the devices; then the translators are attached.
    await Promise.all(clients.flatMap((client, c) => VARIANTS.flatMap((v) => topics[v][c]!.map((topic) => client.publishAsync(topic, '{"hello":true}', { qos: 1 })))));
    for (const variant of VARIANTS) {
      if (!preferences[variant]) continue;
      let devices: { _id: string }[] = [];
      for (let tries = 0; devices.length < DEVICES && tries < 100; tries++) {
        devices = await call<{ _id: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id&filter[name]=${encodeURIComponent(`bench/${variant}-`)}`);
        if (devices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
      }
      for (const d of devices) await call('PUT', `/api/iotnodes/${d._id}`, { translatorPreferences: preferences[variant] });
    }
    // Warm every translator context and device document once, outside the measurement.
    // Messages each variant sent in all, warm-up included: what a CPU profile of the run (BENCH_PROFILE) divides by.
    const sent: Partial<Record<Variant, number>> = {};
    for (const variant of VARIANTS) sent[variant] = (await phase(clients, topics[variant], uplinksOf(variant)).catch(() => ({ acked: 0 }))).acked;

    const samples: Record<Variant, number[]> = { plain: [], decoder: [], chain: [], codec: [], decodedPlain: [] };
    const catchUpMs: Record<Variant, number[]> = { plain: [], decoder: [], chain: [], codec: [], decodedPlain: [] };
    const cpu: Partial<Record<Variant, { platform: number; postgres: number; messages: number }>> = {};
    for (let round = 0; round < ROUNDS; round++) {
      for (const variant of round % 2 ? [...VARIANTS].reverse() : VARIANTS) {
        await settle();
        const meter = cpuMeter(platform.child.pid!, join(dir, 'pg'));
        const { rate, acked } = await phase(clients, topics[variant], uplinksOf(variant));
        // The read models' work on the phase counts in its CPU time, not in its rate.
        catchUpMs[variant].push(await settle());
        const spent = meter.per(acked, variant);
        const sum = (cpu[variant] ??= { platform: 0, postgres: 0, messages: 0 });
        sum.platform += spent.server * acked;
        sum.postgres += (spent.postgres ?? 0) * acked;
        sum.messages += acked;
        sent[variant] = (sent[variant] ?? 0) + acked;
        samples[variant].push(rate);
      }
    }
    await Promise.all(clients.map((c) => c.endAsync()));
    const mean = (xs: number[]) => (xs.length === 0 ? 0 : Math.round(xs.reduce((a, b) => a + b, 0) / xs.length));
    const accepted = { plain: mean(samples.plain), decoder: mean(samples.decoder), chain: mean(samples.chain), codec: mean(samples.codec), decodedPlain: mean(samples.decodedPlain) };
    const cpuMicrosPerMessage = Object.fromEntries(
      Object.entries(cpu).map(([v, s]) => [v, { platform: Math.round(s.platform / Math.max(1, s.messages)), postgres: Math.round(s.postgres / Math.max(1, s.messages)) }]),
    ) as IngestFigures['cpuMicrosPerMessage'];
    const sample = (await call<Record<string, unknown>[]>('GET', `/api/iotnodes?limit=1&filter[name]=${encodeURIComponent('bench/chain-0')}`))[0]!;
    const codecSample = (await call<Record<string, unknown>[]>('GET', `/api/iotnodes?limit=1&filter[name]=${encodeURIComponent('bench/codec-0')}`))[0]!;
    const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 1000) / 1000);
    return {
      seconds: SECONDS,
      rounds: ROUNDS,
      devicesPerVariant: DEVICES,
      connections: CONNECTIONS,
      inFlightPerConnection: WINDOW,
      acceptedPerSecond: accepted,
      samples: Object.fromEntries(VARIANTS.map((v) => [v, samples[v].map(Math.round)])) as IngestFigures['samples'],
      catchUpMsAfterPhase: Object.fromEntries(VARIANTS.map((v) => [v, catchUpMs[v]])) as IngestFigures['catchUpMsAfterPhase'],
      cpuMicrosPerMessage,
      sent,
      ratioDecoderToPlain: ratio(accepted.decoder, accepted.plain),
      ratioChainToPlain: ratio(accepted.chain, accepted.plain),
      ratioCodecToPlain: ratio(accepted.codec, accepted.plain),
      ratioCodecToDecodedPlain: ratio(accepted.codec, accepted.decodedPlain),
      ratiosPerRound: {
        decoderToPlain: samples.decoder.map((x, i) => ratio(x, samples.plain[i] ?? 0)),
        codecToPlain: samples.codec.map((x, i) => ratio(x, samples.plain[i] ?? 0)),
      },
      aim: { ratioAtLeast: 0.8, met: accepted.decoder / accepted.plain >= 0.8, codecRatioAtLeast: 0.8, codecMet: accepted.codec / accepted.plain >= 0.8 },
      decodedSample: {
        ...Object.fromEntries(['temperature', 'relativeHumidity', 'temperatureDayCount'].map((k) => [k, sample?.[k]])),
        codec: Object.fromEntries(['temperature', 'co2', 'batteryVoltage'].map((k) => [k, codecSample?.[k]])),
      },
    };
  } finally {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 2000));
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    await db?.end();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify({ benchmark: 'translator-ingest', ...(await measureIngest()) }, null, 2));
}
