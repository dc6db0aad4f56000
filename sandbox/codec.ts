/**
 * The device-repository codec form (The Things Stack, ChirpStack v4, LoRa
 * Alliance TS013): what `decodeUplink` and `encodeDownlink` return, read
 * back in the host as untrusted data.
 *
 *   decodeUplink({bytes, fPort, recvTime, variables}) -> {data?, warnings?, errors?}
 *   encodeDownlink({data, fPort?})                      -> {bytes, fPort?, warnings?, errors?}
 *
 * Non-empty `errors` fail the call (kind `codec`); `warnings` travel with a
 * successful result.
 */
import { TranslatorError } from './errors.js';
import { storableText } from './result.js';
import { isRecord } from './values.js';

/** Messages kept from a codec's `errors` or `warnings`, and their length. */
export const MAX_CODEC_MESSAGES = 20;
export const MAX_CODEC_MESSAGE_LENGTH = 500;
/** Downlink bytes an encoder may produce; network servers allow less (LoRaWAN: at most 242). */
export const MAX_DOWNLINK_BYTES = 1024;

export interface Decoded {
  data: Record<string, unknown>;
  warnings: string[];
}

export interface Encoded {
  hexEncoded: string;
  fPort: number;
  warnings: string[];
  logs: string[];
  /** As Translation's: the call cost its context. */
  discarded?: true;
}

export interface DownlinkRequest {
  data: Record<string, unknown>;
  fPort?: number;
}

function show(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${String(value).slice(0, 40)}`;
}

/** Codec messages as storable text, bounded; anything not a list is a malformed return. */
function messages(value: unknown, name: string, fn: string, logs: string[]): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new TranslatorError('result', `${fn} must return ${name} as a list of strings, got ${show(value)}`, { key: name, logs });
  const out = value.slice(0, MAX_CODEC_MESSAGES).map((m) => {
    const text = typeof m === 'string' ? m : JSON.stringify(m) ?? String(m);
    return storableText(text.length > MAX_CODEC_MESSAGE_LENGTH ? `${text.slice(0, MAX_CODEC_MESSAGE_LENGTH)}…` : text);
  });
  if (value.length > MAX_CODEC_MESSAGES) out.push(`… ${value.length - MAX_CODEC_MESSAGES} more`);
  return out;
}

function failOnErrors(errors: string[], fn: string, logs: string[]): void {
  if (errors.length === 0) return;
  throw new TranslatorError('codec', `${fn} reported ${errors.length === 1 ? 'an error' : `${errors.length} errors`}: ${errors.join('; ')}`, { logs, codecErrors: errors });
}

/** `decodeUplink`'s return value, or TranslatorError (`codec` for its errors, `result` for a malformed value). */
export function readDecoded(returned: unknown, logs: string[]): Decoded {
  if (!isRecord(returned)) throw new TranslatorError('result', `decodeUplink must return an object like {data: {...}}, it returned ${show(returned)}`, { logs });
  failOnErrors(messages(returned.errors, 'errors', 'decodeUplink', logs), 'decodeUplink', logs);
  const warnings = messages(returned.warnings, 'warnings', 'decodeUplink', logs);
  const { data } = returned;
  if (data === undefined || data === null) return { data: {}, warnings };
  if (!isRecord(data)) throw new TranslatorError('result', `decodeUplink must return data as an object of values, got ${show(data)}`, { key: 'data', logs });
  return { data, warnings };
}

/** `encodeDownlink`'s return value, or TranslatorError (`codec` for its errors, `result` for a malformed value). */
export function readEncoded(returned: unknown, request: DownlinkRequest, logs: string[]): Encoded {
  if (!isRecord(returned)) throw new TranslatorError('result', `encodeDownlink must return an object like {bytes: [...], fPort}, it returned ${show(returned)}`, { logs });
  failOnErrors(messages(returned.errors, 'errors', 'encodeDownlink', logs), 'encodeDownlink', logs);
  const warnings = messages(returned.warnings, 'warnings', 'encodeDownlink', logs);
  const { bytes } = returned;
  if (!Array.isArray(bytes) || !bytes.every((b) => Number.isInteger(b) && (b as number) >= 0 && (b as number) <= 255)) {
    throw new TranslatorError('result', `encodeDownlink must return bytes as a list of whole numbers 0 to 255, got ${show(bytes)}`, { key: 'bytes', logs });
  }
  if (bytes.length > MAX_DOWNLINK_BYTES) {
    throw new TranslatorError('result', `encodeDownlink returned ${bytes.length} bytes, more than ${MAX_DOWNLINK_BYTES}`, { key: 'bytes', logs });
  }
  const fPort = returned.fPort ?? request.fPort;
  if (fPort === undefined) throw new TranslatorError('result', 'encodeDownlink returned no fPort and none was asked for', { key: 'fPort', logs });
  if (!Number.isInteger(fPort) || (fPort as number) < 1 || (fPort as number) > 223) {
    throw new TranslatorError('result', `encodeDownlink must return fPort as a LoRaWAN application port, 1 to 223, got ${show(fPort)}`, { key: 'fPort', logs });
  }
  return { hexEncoded: Buffer.from(bytes as number[]).toString('hex'), fPort: fPort as number, warnings, logs };
}
