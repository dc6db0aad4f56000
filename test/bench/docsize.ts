/**
 * `npm run bench:docsize`: what the device document's size check costs on
 * documents of many small values, as the platform keeps them alive (the
 * devices projection remembers documents, the log's window keeps reports).
 * Each round parses a 256 KiB payload of empty arrays (`[[],[],…]`, the most
 * values a payload of that size holds), keeps it, and measures it; the
 * baseline is the parse of the same payload in the same round. The size check
 * must stay a small multiple of the parse however many are alive: before it
 * remembered only large values, the 30th payload took 2 s to measure.
 */
import { sizeOf } from '../../domain/devices/size.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 60);
const text = '{"a":[' + Array(87_000).fill('[]').join(',') + ']}';
const alive: unknown[] = [];
const parseMs: number[] = [];
const sizeMs: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  let s = performance.now();
  const payload = JSON.parse(text) as Record<string, unknown>;
  parseMs.push(performance.now() - s);
  alive.push(payload);
  s = performance.now();
  // As the fold measures a document: the payload's values below a new top level.
  sizeOf({ reportedAt: '2026-01-01T00:00:00.000Z', ...payload });
  sizeMs.push(performance.now() - s);
}
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const last = (xs: number[]) => xs.slice(-10);
console.log(
  JSON.stringify(
    {
      benchmark: 'docsize',
      payloadBytes: text.length,
      valuesPerPayload: 87_001,
      payloadsAlive: ROUNDS,
      sizeCheckMsPerPayload: { mean: +(sum(sizeMs) / ROUNDS).toFixed(2), lastTenMean: +(sum(last(sizeMs)) / 10).toFixed(2), max: +Math.max(...sizeMs).toFixed(2) },
      baseline: { what: 'JSON.parse of the same payload', msPerPayload: { mean: +(sum(parseMs) / ROUNDS).toFixed(2), lastTenMean: +(sum(last(parseMs)) / 10).toFixed(2) } },
      ratioToBaseline: +(sum(sizeMs) / sum(parseMs)).toFixed(3),
      heapUsedMiB: Math.round(process.memoryUsage().heapUsed / 1048576),
    },
    null,
    2,
  ),
);
