/**
 * A translator's `spec`: every field it may emit, with a type or a measurement
 * descriptor. `checkSpec` guards uploads; `result.ts` checks values against it.
 */

import { isRecord } from './values.js';

export const FIELD_TYPES = ['string', 'number', 'boolean', 'date', 'object', 'array', 'geoJsonPoint'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

/**
 * Units a measurement may declare: one symbol per kind of quantity, so one
 * quantity never shows up under two units (`m`, never `mm` as well; `°C`,
 * never `K`; `kWh`, never `Wh` or `J`), and only these exact spellings pass
 * (`°C` not `℃` or `C`, `m³` not `m3`). Conversions belong in the translator
 * (hPa x100 to Pa, mV /1000 to V, g /1000 to kg, l /1000 to m³, Wh /1000 to
 * kWh). `''` is for dimensionless values (counts, indices, plain ratios).
 * Kinds that look alike but are different quantities keep their own symbol:
 * real, apparent and reactive power (`W`, `VA`, `var`); a level ratio and an
 * absolute power level (`dB`, `dBm`); fractions in percent and in parts per
 * million (`%` for humidity or battery level, `ppm` for gas concentrations).
 */
export const UNITS = [
  '',
  // electrical: voltage, current, real/apparent/reactive power, energy, resistance
  'V', 'A', 'W', 'VA', 'var', 'kWh', 'Ω',
  // pressure, length, speed, acceleration, angle
  'Pa', 'm', 'm/s', 'm/s²', '°',
  // temperature
  '°C',
  // fractions and concentrations
  '%', 'ppm', 'µg/m³',
  // time and frequency
  's', 'Hz',
  // light, sound and radio levels, irradiance
  'lx', 'dB', 'dBm', 'W/m²',
  // mass and volume
  'kg', 'm³',
] as const;
export type Unit = (typeof UNITS)[number];

export interface Measurement {
  type: FieldType;
  unit: Unit;
  /** lowerCamelCase name of what is measured, e.g. `temperature`, `relativeHumidity`. */
  quantity: string;
}

export type FieldSpec = FieldType | Measurement;
export type TranslatorSpec = Record<string, FieldSpec>;

export interface SpecIssue {
  /** The spec field at fault (`''` for the spec as a whole). */
  field: string;
  problem: string;
}

const LOWER_CAMEL = /^[a-z][a-zA-Z0-9]*$/;
export const MAX_SPEC_FIELDS = 500;
export const MAX_FIELD_NAME_LENGTH = 64;

/**
 * Names a translator may not emit even though they are lowerCamelCase:
 * members of Object.prototype (a key like `constructor` is how merge-style
 * code gets polluted), and device fields the platform itself manages.
 */
export const RESERVED_FIELDS: ReadonlySet<string> = new Set([
  'constructor', 'prototype', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable',
  'toLocaleString', 'toString', 'valueOf',
  'secret', 'connector', 'rabbitRouting', 'updatedAt', 'translatorPreferences',
]);

const typeSet: ReadonlySet<string> = new Set(FIELD_TYPES);
const unitSet: ReadonlySet<string> = new Set(UNITS);

export function isFieldType(value: unknown): value is FieldType {
  return typeof value === 'string' && typeSet.has(value);
}

export function fieldNameProblem(name: string): string | undefined {
  if (name.length > MAX_FIELD_NAME_LENGTH) return `is longer than ${MAX_FIELD_NAME_LENGTH} characters`;
  if (!LOWER_CAMEL.test(name)) return 'is not a flat lowerCamelCase name (letters and digits, starting with a lowercase letter)';
  if (RESERVED_FIELDS.has(name)) return 'is reserved and cannot be emitted by a translator';
  return undefined;
}

/** Every problem with an uploaded spec; empty when it is valid. */
export function checkSpec(spec: unknown): SpecIssue[] {
  if (!isRecord(spec)) return [{ field: '', problem: 'spec must be an object mapping field names to types' }];
  const names = Object.keys(spec);
  const issues: SpecIssue[] = [];
  if (names.length > MAX_SPEC_FIELDS) issues.push({ field: '', problem: `spec declares more than ${MAX_SPEC_FIELDS} fields` });
  for (const field of names) {
    const nameProblem = fieldNameProblem(field);
    if (nameProblem) issues.push({ field, problem: nameProblem });
    issues.push(...entryIssues(field, spec[field]));
  }
  return issues;
}

function entryIssues(field: string, entry: unknown): SpecIssue[] {
  const known = `one of ${FIELD_TYPES.join(', ')}`;
  if (typeof entry === 'string') {
    return isFieldType(entry) ? [] : [{ field, problem: `has unknown type '${entry}' (expected ${known})` }];
  }
  if (!isRecord(entry)) {
    return [{ field, problem: `must be a type string or a measurement descriptor {type, unit, quantity}` }];
  }
  const issues: SpecIssue[] = [];
  for (const key of Object.keys(entry)) {
    if (key !== 'type' && key !== 'unit' && key !== 'quantity') {
      issues.push({ field, problem: `has unexpected key '${key}' (a measurement descriptor is {type, unit, quantity})` });
    }
  }
  const { type, unit, quantity } = entry;
  if (!isFieldType(type)) issues.push({ field, problem: `has unknown type '${String(type)}' (expected ${known})` });
  if (typeof unit !== 'string') {
    issues.push({ field, problem: `needs a unit string ('' for dimensionless values)` });
  } else if (!unitSet.has(unit)) {
    issues.push({ field, problem: `has unit '${unit}', which is not an accepted SI symbol (accepted: ${UNITS.map((u) => `'${u}'`).join(', ')})` });
  } else if (unit !== '' && type !== 'number') {
    issues.push({ field, problem: `has unit '${unit}' but type '${String(type)}'; only numbers carry units` });
  }
  if (typeof quantity !== 'string' || !LOWER_CAMEL.test(quantity)) {
    issues.push({ field, problem: 'needs a lowerCamelCase quantity, e.g. temperature or relativeHumidity' });
  }
  return issues;
}

/** The value type a spec entry declares. */
export function declaredType(entry: FieldSpec): FieldType {
  return typeof entry === 'string' ? entry : entry.type;
}
