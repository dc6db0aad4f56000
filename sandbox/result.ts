/**
 * What a translation must look like once it is back in the host, and the check
 * that enforces it against the translator's spec. Any violation rejects the
 * whole translation; nothing is partially applied.
 */
import { TranslatorError } from './errors.js';
import { declaredType, type FieldType, type TranslatorSpec } from './spec.js';
import { isRecord, show } from './values.js';

/**
 * One sub-device update emitted by a gateway decoder.
 * `identifier` names the sub-device by its `secret` or another field unique
 * among devices (the ingest side decides which it looks up); `result` is
 * checked against the same spec as the gateway's own result, since the spec
 * lists every field the translator emits.
 */
export interface DeviceUpdate {
  identifier: string;
  result: Record<string, unknown>;
}

export interface Translation {
  /** Fields to write on the device; `{}` when the translator had nothing to emit. */
  result: Record<string, unknown>;
  /** Present only when the translator returned a non-empty list. */
  additionalDeviceUpdates?: DeviceUpdate[];
  /** `console.log` lines of this call, bounded (see harness.ts). */
  logs: string[];
  /** `warnings` a device-repository codec returned with its data. */
  warnings?: string[];
  /** Paths of the codec's data left out because neither the fieldMap nor the spec names them (`unmapped: drop`). */
  dropped?: string[];
  /** The call left its context unfit for another (promise jobs pending): the result stands, the context is rebuilt. */
  discarded?: true;
}

export const MAX_DEVICE_UPDATES = 1000;
/** Nesting a stored value may have: a field's value is level 1. Deeper data is refused before anything recursive sees it. */
export const MAX_RESULT_DEPTH = 32;
/** Keys that let data rewrite prototypes when someone later merges it into an object. */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

type Check = (value: unknown) => string | undefined;

/** A rejected translation before the call's logs are attached. */
class Violation {
  constructor(
    readonly kind: 'spec' | 'result',
    readonly message: string,
    readonly key?: string,
  ) {}
}

// Date-only, or date and time with an explicit offset: a time without one is
// ambiguous once stored.
const ISO_8601 = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2}))?$/;

function isIsoDate(value: string): boolean {
  const match = ISO_8601.exec(value);
  if (!match || Number.isNaN(Date.parse(value))) return false;
  // Date.parse rolls 2024-02-30 over to March; the calendar date must exist as written.
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(Date.UTC(year, month - 1, day));
  return date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

function checkFor(type: FieldType): Check {
  switch (type) {
    case 'string':
      return (v) => (typeof v === 'string' ? undefined : `expected string, got ${show(v)}`);
    case 'number':
      // Stored, an infinity would become null (JSON has none).
      return (v) => (typeof v !== 'number' ? `expected number, got ${show(v)}` : Number.isFinite(v) ? undefined : `${v} is not a finite number`);
    case 'boolean':
      return (v) => (typeof v === 'boolean' ? undefined : `expected boolean, got ${show(v)}`);
    case 'date':
      // Numbers are refused: seconds or milliseconds would be a guess. A Date
      // returned in the sandbox arrives here as its ISO string.
      return (v) =>
        typeof v === 'string' && isIsoDate(v)
          ? undefined
          : `expected an ISO 8601 date string (e.g. 2024-05-01T12:00:00Z), got ${show(v)}`;
    case 'object':
      return (v) => (isRecord(v) ? undefined : `expected object, got ${show(v)}`);
    case 'array':
      return (v) => (Array.isArray(v) ? undefined : `expected array, got ${show(v)}`);
    case 'geoJsonPoint':
      return geoJsonPointProblem;
    default: {
      const unreachable: never = type;
      throw new Error(`unknown field type ${String(unreachable)}`);
    }
  }
}

function geoJsonPointProblem(v: unknown): string | undefined {
  const expected = "expected a GeoJSON point {type: 'Point', coordinates: [longitude, latitude]}";
  if (!isRecord(v)) return `${expected}, got ${show(v)}`;
  const extra = Object.keys(v).find((k) => k !== 'type' && k !== 'coordinates');
  if (extra !== undefined) return `${expected}, got an extra key '${extra}'`;
  if (v.type !== 'Point') return `${expected}, got type ${show(v.type)}`;
  const c = v.coordinates;
  if (!Array.isArray(c) || c.length < 2 || c.length > 3 || !c.every((n) => typeof n === 'number')) {
    return `${expected}, coordinates must be 2 or 3 numbers`;
  }
  const [lng, lat] = c as number[];
  if (lng! < -180 || lng! > 180) return `longitude ${lng} is outside -180..180`;
  if (lat! < -90 || lat! > 90) return `latitude ${lat} is outside -90..90`;
  return undefined;
}

// NUL and UTF-16 surrogates: rare enough that one test skips almost every string.
const SUSPECT = /[\u0000\ud800-\udfff]/;
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why a string cannot be stored: PostgreSQL's text and jsonb refuse NUL and lone surrogates. */
export function textProblem(text: string): string | undefined {
  if (!SUSPECT.test(text)) return undefined;
  if (text.includes('\u0000')) return 'contains a NUL character (\\u0000), which cannot be stored';
  if (LONE_SURROGATE.test(text)) return 'contains a lone surrogate (e.g. \\ud800), which is not valid Unicode and cannot be stored';
  return undefined;
}

/** A string with NUL and lone surrogates replaced by U+FFFD, for text the platform stores on a translator's behalf (logs, warnings). */
export function storableText(text: string): string {
  return SUSPECT.test(text) ? text.replace(/\u0000/g, '\ufffd').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\ufffd') : text;
}

/**
 * Why a value cannot be stored as it is: a key that could pollute a
 * prototype downstream, a string PostgreSQL refuses, or nesting past
 * MAX_RESULT_DEPTH. `path` names the value; `depth` is its level.
 */
export function contentProblem(value: unknown, path: string, depth: number): string | undefined {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem && `${path}: ${problem}`;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `${path}: ${value} is not a finite number`;
  if (typeof value !== 'object' || value === null) return undefined;
  if (depth > MAX_RESULT_DEPTH) return `${path}: nests deeper than ${MAX_RESULT_DEPTH} levels`;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = contentProblem(value[i], `${path}[${i}]`, depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  for (const key of Object.keys(value)) {
    const at = `${path}.${key}`;
    if (FORBIDDEN_KEYS.has(key)) return `${path}: contains the key '${key}' at ${at}, which is not allowed`;
    const keyProblem = textProblem(key);
    if (keyProblem) return `${path}: has a key that ${keyProblem}`;
    const found = contentProblem((value as Record<string, unknown>)[key], at, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Where a non-finite number was dropped inside the sandbox (NaN is dropped silently). */
export interface NonFinite {
  path: string;
  value: string;
}

/**
 * Builds the output check for one spec. The returned function takes the
 * translator's return value as parsed from JSON (undefined and NaN already
 * removed inside the sandbox) and either returns the translation or throws.
 */
export function createResultCheck(spec: TranslatorSpec) {
  const checks = new Map<string, Check>();
  for (const [field, entry] of Object.entries(spec)) checks.set(field, checkFor(declaredType(entry)));

  function checkFields(result: unknown, prefix: string): Record<string, unknown> {
    if (!isRecord(result)) {
      throw new Violation('result', `${prefix || 'result'} must be an object of fields, got ${show(result)}`, prefix || 'result');
    }
    for (const key of Object.keys(result)) {
      const check = checks.get(key);
      const where = prefix ? `${prefix}.${key}` : key;
      if (!check) throw new Violation('spec', `${where}: not declared in the translator's spec`, where);
      const value = result[key];
      if (value === null) {
        throw new Violation('spec', `${where}: null is not a valid ${declaredType(spec[key]!)} (leave the key out instead)`, where);
      }
      const problem = check(value);
      if (problem) throw new Violation('spec', `${where}: ${problem}`, where);
      const content = contentProblem(value, where, 1);
      if (content) throw new Violation('spec', content, where);
    }
    return result;
  }

  return function checkTranslation(returned: unknown, nonFinite: NonFinite[], logs: string[]): Translation {
    const first = nonFinite[0];
    if (first) {
      throw new TranslatorError('spec', `${first.path}: ${first.value} is not a finite number`, { key: first.path, logs });
    }
    try {
      if (!isRecord(returned)) {
        throw new Violation('result', `translate must return an object like {result: {...}} or {}, it returned ${show(returned)}`);
      }
      for (const key of Object.keys(returned)) {
        if (key !== 'result' && key !== 'additionalDeviceUpdates') {
          throw new Violation('result', `unexpected key '${key}' in the return value (allowed: result, additionalDeviceUpdates)`, key);
        }
      }
      const result = returned.result === undefined ? {} : checkFields(returned.result, '');
      const translation: Translation = { result, logs };
      const updates = returned.additionalDeviceUpdates;
      if (updates === undefined) return translation;
      if (!Array.isArray(updates)) {
        throw new Violation('result', `additionalDeviceUpdates must be a list of {identifier, result}, got ${show(updates)}`, 'additionalDeviceUpdates');
      }
      if (updates.length > MAX_DEVICE_UPDATES) {
        throw new Violation('result', `additionalDeviceUpdates has ${updates.length} entries, more than ${MAX_DEVICE_UPDATES}`, 'additionalDeviceUpdates');
      }
      const checked = updates.map((update: unknown, i): DeviceUpdate => {
        const at = `additionalDeviceUpdates[${i}]`;
        if (!isRecord(update)) throw new Violation('result', `${at} must be {identifier, result}, got ${show(update)}`, at);
        const extra = Object.keys(update).find((k) => k !== 'identifier' && k !== 'result');
        if (extra !== undefined) throw new Violation('result', `${at} has unexpected key '${extra}' (expected identifier, result)`, `${at}.${extra}`);
        const { identifier } = update;
        if (typeof identifier !== 'string' || identifier === '') {
          throw new Violation('result', `${at}.identifier must be a non-empty string, got ${show(identifier)}`, `${at}.identifier`);
        }
        return { identifier, result: checkFields(update.result ?? {}, `${at}.result`) };
      });
      if (checked.length > 0) translation.additionalDeviceUpdates = checked;
      return translation;
    } catch (error) {
      if (!(error instanceof Violation)) throw error;
      throw new TranslatorError(error.kind, error.message, { ...(error.key === undefined ? {} : { key: error.key }), logs });
    }
  };
}

export type ResultCheck = ReturnType<typeof createResultCheck>;
