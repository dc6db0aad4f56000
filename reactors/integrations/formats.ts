import { ValidationError } from '../../domain/shared/errors.js';

/** The largest application payload of a LoRaWAN frame (the largest data rate's 242 bytes, with room for regional plans up to 255). */
export const MAX_UPLINK_BYTES = 255;

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A number, or the fallback when absent (protobuf JSON leaves zero values out). */
export function numberOr(value: unknown, fallback: number): number {
  return typeof value === 'number' && Number.isFinite(value) ? value : fallback;
}

/** Strict base64 (standard or URL alphabet, padded or not): anything else is a 422 naming the field. */
export function base64Bytes(value: unknown, field: string): Buffer {
  if (typeof value !== 'string' || !/^[A-Za-z0-9+/_-]*={0,2}$/.test(value) || value.replace(/=+$/, '').length % 4 === 1) throw ValidationError.field(field, 'must be base64');
  return Buffer.from(value, value.includes('-') || value.includes('_') ? 'base64url' : 'base64');
}

/** Hexadecimal, two digits per byte. */
export function hexBytes(value: unknown, field: string): Buffer {
  if (typeof value !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(value)) throw ValidationError.field(field, 'must be hexadecimal, two digits per byte');
  return Buffer.from(value, 'hex');
}
