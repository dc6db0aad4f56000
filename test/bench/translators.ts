/**
 * Translator sandbox benchmark: per-call latency and sequential throughput of
 * a typical hex decoder in a warm context, of a decoder + chained translator
 * pair, of a device-repository codec (`decodeUplink`) with a field map, and,
 * as the baseline in the same run, the same code as plain JavaScript called
 * directly in Node (for the codec: its decodeUplink, then the same field map
 * applied in Node). Prints one JSON object.
 *
 * Each phase runs for a fixed time (or a fixed call count, whichever ends
 * first). Then `ingest` compares ingest throughput with a translator
 * attached to ingest of the same messages without one (translatorIngest.ts).
 */
import { cpus, loadavg } from 'node:os';
import _ from 'lodash';
import { compileFieldMap, createSandbox, type Translation } from '../../sandbox/index.js';
import { climateHex, climateSensor, dailyTemperature } from '../sandbox/fixtures.js';
import { elsysErsCo2 } from '../translators/codecs/index.js';
import { measureIngest } from './translatorIngest.js';

const PHASE_MS = 4000;
const MAX_CALLS = 200_000;
const WARMUP_CALLS = 2000;

interface Figures {
  calls: number;
  p50Us: number;
  p99Us: number;
  callsPerSecond: number;
}

function percentile(sorted: Float64Array, p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;
}

async function measure(call: (i: number) => unknown): Promise<Figures> {
  for (let i = 0; i < WARMUP_CALLS; i++) await call(i);
  const samples = new Float64Array(MAX_CALLS);
  let n = 0;
  const started = process.hrtime.bigint();
  const deadline = started + BigInt(PHASE_MS) * 1_000_000n;
  let now = started;
  while (n < MAX_CALLS && now < deadline) {
    const before = now;
    await call(n);
    now = process.hrtime.bigint();
    samples[n++] = Number(now - before) / 1000;
  }
  const seconds = Number(now - started) / 1e9;
  const sorted = samples.subarray(0, n).sort();
  const round = (x: number) => Math.round(x * 100) / 100;
  return { calls: n, p50Us: round(percentile(sorted, 0.5)), p99Us: round(percentile(sorted, 0.99)), callsPerSecond: Math.round(n / seconds) };
}

/** The same source, compiled by Node with the host's Buffer and lodash in scope. */
function plain<T extends (...args: never[]) => unknown>(code: string, entry = 'translate'): T {
  return new Function('Buffer', '_', `${code}\nreturn ${entry};`)(Buffer, _) as T;
}

/** Elsys frames with every item type the codec knows, values varying. */
function elsysHex(i: number): string {
  const b = Buffer.alloc(16);
  b.writeUInt8(0x01, 0); b.writeInt16BE(200 + i, 1);
  b.writeUInt8(0x02, 3); b.writeUInt8(30 + (i % 50), 4);
  b.writeUInt8(0x04, 5); b.writeUInt16BE(100 + i, 6);
  b.writeUInt8(0x05, 8); b.writeUInt8(i % 20, 9);
  b.writeUInt8(0x06, 10); b.writeUInt16BE(400 + i * 3, 11);
  b.writeUInt8(0x07, 13); b.writeUInt16BE(3000 + i, 14);
  return b.toString('hex');
}

// A rotating set of uplinks, so no call is a repeat of the previous one.
const uplinks = Array.from({ length: 64 }, (_unused, i) => ({ hexEncoded: climateHex(15 + i / 8, 30 + i / 2, 2900 + i), port: 1 }));
const codecUplinks = Array.from({ length: 64 }, (_unused, i) => ({ hexEncoded: elsysHex(i), port: 5 }));
const parameters = { highAlarmAbove: 24 };
const reportedAt = (i: number) => new Date(Date.UTC(2024, 4, 1) + i * 60_000).toISOString();

const sandbox = createSandbox({ poolSize: 1 });
try {
  const decoder = await sandbox.load({ key: 'bench-climate@1.0.0', code: climateSensor.code, spec: climateSensor.spec });
  const analytics = await sandbox.load({ key: 'bench-daily@1.0.0', code: dailyTemperature.code, spec: dailyTemperature.spec });

  const codec = await sandbox.load({ key: 'bench-elsys@1.0.0', code: elsysErsCo2.codec, spec: elsysErsCo2.spec, fieldMap: elsysErsCo2.fieldMap });
  const receivedAt = new Date().toISOString();

  const sandboxDecoder = await measure((i) => decoder.decode(uplinks[i % uplinks.length]!));
  const sandboxCodec = await measure((i) => codec.decode(codecUplinks[i % codecUplinks.length]!, { receivedAt }));

  let iotnode: Record<string, unknown> = { name: 'bench' };
  const sandboxPair = await measure(async (i) => {
    const decoded = await decoder.decode(uplinks[i % uplinks.length]!);
    const next = { ...iotnode, ...decoded.result, reportedAt: reportedAt(i) };
    const derived: Translation = await analytics.chain(next, parameters);
    iotnode = { ...next, ...derived.result };
  });

  type Decode = (input: { encodedData: { hexEncoded: string; port: number } }) => { result: Record<string, unknown> };
  type Chain = (iotnode: Record<string, unknown>, parameters: Record<string, unknown>) => { result: Record<string, unknown> };
  const plainDecode = plain<Decode>(climateSensor.code);
  const plainChain = plain<Chain>(dailyTemperature.code);
  const baselineDecoder = await measure((i) => plainDecode({ encodedData: uplinks[i % uplinks.length]! }));
  type DecodeUplink = (input: { bytes: number[]; fPort: number; recvTime: Date }) => { data: Record<string, unknown> };
  const plainCodec = plain<DecodeUplink>(elsysErsCo2.codec, 'decodeUplink');
  const map = compileFieldMap(elsysErsCo2.fieldMap, elsysErsCo2.spec, 'reject');
  const codecBytes = codecUplinks.map((u) => [...Buffer.from(u.hexEncoded, 'hex')]);
  const recvTime = new Date(receivedAt);
  const baselineCodec = await measure((i) => map(plainCodec({ bytes: codecBytes[i % codecBytes.length]!, fPort: 5, recvTime }).data));
  let plainNode: Record<string, unknown> = { name: 'bench' };
  const baselinePair = await measure((i) => {
    const decoded = plainDecode({ encodedData: uplinks[i % uplinks.length]! });
    const next = { ...plainNode, ...decoded.result, reportedAt: reportedAt(i) };
    plainNode = { ...next, ...plainChain(next, parameters).result };
  });

  // Ingest with and without a translator attached, through a platform process of its own.
  const ingest = await measureIngest();

  const ratio = (a: number, b: number) => Math.round((a / b) * 10) / 10;
  console.log(
    JSON.stringify(
      {
        benchmark: 'translators',
        machine: { cpus: cpus().length, loadAverage1m: Math.round(loadavg()[0]! * 100) / 100, node: process.version },
        sandbox: { decoder: sandboxDecoder, chainedPair: sandboxPair, codecWithFieldMap: sandboxCodec },
        baselinePlainNode: { decoder: baselineDecoder, chainedPair: baselinePair, codecWithFieldMap: baselineCodec },
        ratios: {
          decoderP50SandboxOverPlain: ratio(sandboxDecoder.p50Us, baselineDecoder.p50Us),
          decoderThroughputPlainOverSandbox: ratio(baselineDecoder.callsPerSecond, sandboxDecoder.callsPerSecond),
          pairP50SandboxOverPlain: ratio(sandboxPair.p50Us, baselinePair.p50Us),
          pairThroughputPlainOverSandbox: ratio(baselinePair.callsPerSecond, sandboxPair.callsPerSecond),
          codecP50SandboxOverPlain: ratio(sandboxCodec.p50Us, baselineCodec.p50Us),
          codecThroughputPlainOverSandbox: ratio(baselineCodec.callsPerSecond, sandboxCodec.callsPerSecond),
        },
        aim: {
          decoderP50UnderUs: 50,
          decoderCallsPerSecondAtLeast: 20_000,
          codecP50UnderUs: 50,
          met: sandboxDecoder.p50Us < 50 && sandboxDecoder.callsPerSecond >= 20_000 && sandboxCodec.p50Us < 50,
        },
        contexts: sandbox.stats(),
        ingest,
      },
      null,
      2,
    ),
  );
} finally {
  sandbox.dispose();
}
