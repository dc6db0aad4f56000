/**
 * A translator's examples: inputs with the output they must give, in the
 * shape of the public device repository's examples. Upload runs each one in
 * the sandbox; a version whose examples do not pass is refused.
 *
 * `output` is the translator's whole result: for a device-repository codec,
 * its `data` after the field map, so an example tests the codec and the map
 * together. An example may instead expect the call to fail: `errors` lists
 * the codec's `errors` (for `translate`, texts the thrown message contains).
 */
import type { EncodedData } from './sandbox.js';

export interface ExampleInput {
  hexEncoded?: string;
  port?: number;
  bytes?: number[];
  fPort?: number;
  /** The uplink's time, given to decodeUplink as `recvTime`; default the upload time. */
  recvTime?: string;
}

export interface Example {
  description?: string;
  input: ExampleInput;
  output?: Record<string, unknown>;
  errors?: string[];
}

export interface ExampleResult {
  passed: boolean;
  /** When the example last ran: the upload of the version. */
  ranAt: string;
  /** What the translator gave. */
  output?: Record<string, unknown>;
  warnings?: string[];
  /** Why it did not pass. */
  problem?: string;
}

export const MAX_EXAMPLES = 50;

const HEX = /^(?:[0-9a-fA-F]{2})*$/;
const isPort = (v: unknown) => Number.isInteger(v) && (v as number) >= 0 && (v as number) <= 255;

/** Why an example's input is not a raw uplink; undefined when it is one. */
export function exampleInputProblem(input: ExampleInput): { field: string; problem: string } | undefined {
  const hex = input.hexEncoded !== undefined || input.port !== undefined;
  const bytes = input.bytes !== undefined || input.fPort !== undefined;
  if (hex === bytes) return { field: 'input', problem: 'must be {hexEncoded, port} or {bytes, fPort}' };
  if (hex) {
    if (typeof input.hexEncoded !== 'string' || !HEX.test(input.hexEncoded)) return { field: 'input.hexEncoded', problem: 'must be a hex string of whole bytes' };
    if (input.port !== undefined && !isPort(input.port)) return { field: 'input.port', problem: 'must be a whole number 0 to 255' };
  } else {
    if (!Array.isArray(input.bytes) || !input.bytes.every((b) => Number.isInteger(b) && b >= 0 && b <= 255)) {
      return { field: 'input.bytes', problem: 'must be a list of whole numbers 0 to 255' };
    }
    if (input.fPort !== undefined && !isPort(input.fPort)) return { field: 'input.fPort', problem: 'must be a whole number 0 to 255' };
  }
  if (input.recvTime !== undefined && (typeof input.recvTime !== 'string' || Number.isNaN(Date.parse(input.recvTime)))) {
    return { field: 'input.recvTime', problem: 'must be an ISO 8601 date-time' };
  }
  return undefined;
}

export function exampleUplink(input: ExampleInput): EncodedData {
  if (input.bytes !== undefined) return { hexEncoded: Buffer.from(input.bytes).toString('hex'), port: input.fPort ?? 0 };
  return { hexEncoded: input.hexEncoded ?? '', port: input.port ?? 0 };
}

function show(value: unknown): string {
  if (value === undefined) return 'missing';
  const json = JSON.stringify(value);
  return json.length > 60 ? `${json.slice(0, 60)}…` : json;
}

/** Numbers equal up to rounding in their last digits: 0.1 + 0.2 is 0.3 here. */
function sameNumber(a: number, b: number): boolean {
  return a === b || Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
}

/** The first place where `actual` differs from `expected`, as `<path> is X, expected Y`; undefined when they agree. */
export function firstDifference(expected: unknown, actual: unknown, path: string): string | undefined {
  if (typeof expected === 'number' && typeof actual === 'number') return sameNumber(expected, actual) ? undefined : `${path} is ${show(actual)}, expected ${show(expected)}`;
  if (typeof expected !== 'object' || expected === null || typeof actual !== 'object' || actual === null || Array.isArray(expected) !== Array.isArray(actual)) {
    return expected === actual ? undefined : `${path} is ${show(actual)}, expected ${show(expected)}`;
  }
  if (Array.isArray(expected)) {
    const got = actual as unknown[];
    for (let i = 0; i < Math.max(expected.length, got.length); i++) {
      const found = firstDifference(expected[i], got[i], `${path}[${i}]`);
      if (found) return found;
    }
    return undefined;
  }
  const want = expected as Record<string, unknown>;
  const got = actual as Record<string, unknown>;
  for (const key of Object.keys(want)) {
    if (!Object.hasOwn(got, key)) return `${path}.${key} is missing, expected ${show(want[key])}`;
    const found = firstDifference(want[key], got[key], `${path}.${key}`);
    if (found) return found;
  }
  for (const key of Object.keys(got)) {
    if (!Object.hasOwn(want, key)) return `${path}.${key} is ${show(got[key])}, not expected`;
  }
  return undefined;
}
