/**
 * Importing a device-repository codec: from the codec's examples (its
 * `*-codec.yaml`) and what the codec itself gives for them, a proposed
 * translator with a `spec` and a `fieldMap` that bring its output under the
 * platform's data-model rules, and a review list saying what was guessed.
 * The user reviews the proposal and uploads it; nothing is stored here.
 *
 * Pure: the caller parses the YAML and runs the codec in the sandbox.
 */
import {
  MAX_RESULT_DEPTH,
  MAX_SPEC_FIELDS,
  UNITS,
  compileFieldMap,
  exampleInputProblem,
  fieldNameProblem,
  formatPath,
  type Example,
  type ExampleInput,
  type FieldMap,
  type FieldSpec,
  type Sampled,
  type TranslatorSpec,
  type UnmappedPolicy,
} from '../../sandbox/index.js';
import { ValidationError } from '../shared/errors.js';
import { reservedReason } from './translator.js';

export interface ReviewNote {
  /** The codec output path the note is about, when it is about one. */
  path?: string;
  /** The proposed field. */
  field?: string;
  note: string;
}

export interface Proposal {
  translator: {
    name: string;
    version: string;
    description: string;
    match: { deviceModelName: string };
    spec: TranslatorSpec;
    fieldMap: FieldMap;
    unmapped: UnmappedPolicy;
    examples: Example[];
    code: string;
  };
  review: ReviewNote[];
}

export interface ProposalInput {
  code: string;
  /** The parsed `*-codec.yaml`: `uplinkDecoder.examples` (or top-level `examples`), `downlinkEncoder.examples`. */
  codecYaml: unknown;
  /** The parsed device `*.yaml`: `name`, `description`. */
  deviceYaml?: unknown;
  name?: string;
  version?: string;
  /** The codec's own output for each of `uplinkExamples(codecYaml)`, in order. */
  decoded: Sampled<{ data: Record<string, unknown>; warnings: string[] }>[];
}

interface YamlExample {
  description?: string;
  input: { fPort?: number; bytes?: number[] };
  output?: { data?: unknown; errors?: unknown; warnings?: unknown; bytes?: unknown; fPort?: unknown };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The uplink examples of a codec YAML, as listed (invalid ones included; `proposeTranslator` notes them). */
export function uplinkExamples(codecYaml: unknown): YamlExample[] {
  if (!isRecord(codecYaml)) return [];
  const decoder = isRecord(codecYaml.uplinkDecoder) ? codecYaml.uplinkDecoder : codecYaml;
  const list = decoder.examples;
  return Array.isArray(list) ? list.filter(isRecord).map((e) => e as unknown as YamlExample) : [];
}

/** The downlink-encoder examples of a codec YAML. */
export function downlinkExamples(codecYaml: unknown): YamlExample[] {
  if (!isRecord(codecYaml) || !isRecord(codecYaml.downlinkEncoder)) return [];
  const list = codecYaml.downlinkEncoder.examples;
  return Array.isArray(list) ? list.filter(isRecord).map((e) => e as unknown as YamlExample) : [];
}

/** A unit as codecs write it, and how to reach the accepted symbol. */
const CONVERSIONS: Record<string, { unit: string; scale?: number; offset?: number }> = {
  mV: { unit: 'V', scale: 0.001 },
  mA: { unit: 'A', scale: 0.001 },
  kW: { unit: 'W', scale: 1000 },
  Wh: { unit: 'kWh', scale: 0.001 },
  MWh: { unit: 'kWh', scale: 1000 },
  hPa: { unit: 'Pa', scale: 100 },
  mbar: { unit: 'Pa', scale: 100 },
  kPa: { unit: 'Pa', scale: 1000 },
  bar: { unit: 'Pa', scale: 100000 },
  mm: { unit: 'm', scale: 0.001 },
  cm: { unit: 'm', scale: 0.01 },
  km: { unit: 'm', scale: 1000 },
  g: { unit: 'kg', scale: 0.001 },
  l: { unit: 'm³', scale: 0.001 },
  L: { unit: 'm³', scale: 0.001 },
  m3: { unit: 'm³' },
  K: { unit: '°C', offset: -273.15 },
  C: { unit: '°C' },
  '℃': { unit: '°C' },
  degC: { unit: '°C' },
  ppb: { unit: 'ppm', scale: 0.001 },
  kΩ: { unit: 'Ω', scale: 1000 },
  kohm: { unit: 'Ω', scale: 1000 },
  ms: { unit: 's', scale: 0.001 },
  min: { unit: 's', scale: 60 },
  h: { unit: 's', scale: 3600 },
  lux: { unit: 'lx' },
  'ug/m3': { unit: 'µg/m³' },
  'μg/m³': { unit: 'µg/m³' },
};

/** Words of vendor names, and the canonical word they stand for. */
const WORDS: Record<string, string> = {
  temp: 'temperature',
  tmp: 'temperature',
  hum: 'relativeHumidity',
  humidity: 'relativeHumidity',
  rh: 'relativeHumidity',
  bat: 'battery',
  batt: 'battery',
  vdd: 'batteryVoltage',
  light: 'illuminance',
  lux: 'illuminance',
  luminosity: 'illuminance',
  ill: 'illuminance',
  lum: 'illuminance',
  baro: 'air',
  barometric: 'air',
};

/** The unit a canonical name implies when the codec says none. */
const IMPLIED: Record<string, string> = {
  temperature: '°C',
  relativeHumidity: '%',
  co2: 'ppm',
  illuminance: 'lx',
  batteryLevel: '%',
};

/** Splits `TempC_SHT`, `battery_voltage`, `Active Energy Import T1`, `analog_in_8` into words; digits stay with their letters (`co2`, `T1`). */
function words(text: string): string[] {
  return text
    .split(/[^A-Za-z0-9µμΩ℃]+/)
    .flatMap((part) => part.match(/[A-Z]+\d*(?![a-z])|[A-Z]?[a-z]+\d*|\d+|[µμΩ℃]+[A-Za-z]*/g) ?? [])
    .filter(Boolean);
}

const capital = (w: string) => w.charAt(0).toUpperCase() + w.slice(1);

function camel(parts: string[]): string {
  const joined = parts.map((p, i) => (i === 0 ? p.charAt(0).toLowerCase() + p.slice(1) : capital(p))).join('');
  return /^[a-z]/.test(joined) ? joined : `value${capital(joined)}`;
}

/** Canonical names that are a quantity of their own. */
const QUANTITIES = new Set(['temperature', 'relativeHumidity', 'batteryVoltage', 'batteryLevel', 'illuminance', 'co2', 'pressure', 'airPressure']);

interface Leaf {
  segments: (string | number)[];
  path: string;
  values: unknown[];
  /** A sibling `unit` in a `{value, unit}` object. */
  statedUnit?: string;
}

/** Whether a value nests deeper than stored values may (and deeper than a walk should go). */
function tooDeep(value: unknown, depth = 1): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (depth > MAX_RESULT_DEPTH) return true;
  return Object.values(value).some((v) => tooDeep(v, depth + 1));
}

/**
 * The values a field map can name: primitives, arrays of primitives, and the
 * `value` of `{value, unit, …}` objects (whose other keys are then dropped).
 * The data is no deeper than MAX_RESULT_DEPTH (see `tooDeep`).
 */
function collectLeaves(data: unknown, segments: (string | number)[], into: Map<string, Leaf>, siblings: { dropped: boolean }): void {
  const add = (at: (string | number)[], value: unknown, statedUnit?: string) => {
    const path = formatPath(at);
    const leaf = into.get(path) ?? { segments: at, path, values: [], ...(statedUnit ? { statedUnit } : {}) };
    leaf.values.push(value);
    into.set(path, leaf);
  };
  if (Array.isArray(data)) {
    if (data.every((v) => v === null || typeof v !== 'object')) add(segments, data);
    else data.forEach((v, i) => collectLeaves(v, [...segments, i], into, siblings));
    return;
  }
  if (isRecord(data)) {
    if (segments.length > 0 && 'value' in data && typeof data.unit === 'string' && !isRecord(data.value)) {
      add([...segments, 'value'], data.value, data.unit);
      if (Object.keys(data).length > 1) siblings.dropped = true;
      return;
    }
    for (const [key, value] of Object.entries(data)) collectLeaves(value, [...segments, key], into, siblings);
    return;
  }
  if (segments.length > 0) add(segments, data);
}

function typeOf(values: unknown[]): { type: string; mixed: boolean; nulls: boolean } {
  const types = new Set(values.filter((v) => v !== null).map((v) => (Array.isArray(v) ? 'array' : typeof v === 'object' ? 'object' : typeof v)));
  const [first] = types;
  return { type: first ?? 'number', mixed: types.size > 1, nulls: values.some((v) => v === null) };
}

interface Guess {
  name: string;
  quantity: string;
  unit?: string;
  scale?: number;
  offset?: number;
  how: string;
}

const isUnitWord = (t: string) => t !== '' && ((UNITS as readonly string[]).includes(t) || CONVERSIONS[t] !== undefined) && !/^\d+$/.test(t);

/** A canonical name, unit and conversion for one leaf, and how they were found. */
function guess(leaf: Leaf, type: string): Guess {
  const named = leaf.segments.filter((s): s is string => typeof s === 'string');
  const fromValue = named.length > 1 && named[named.length - 1] === 'value' && leaf.statedUnit !== undefined;
  const nameParts = fromValue ? named.slice(0, -1) : named;
  const tokens = nameParts.flatMap(words);
  let sourceUnit = leaf.statedUnit;
  let how = sourceUnit !== undefined ? `unit '${sourceUnit}' from the codec's own unit key` : '';
  if (sourceUnit === undefined && type === 'number' && tokens.length > 1) {
    // A unit closing the name (`BatV`, `vdd_mV`, `energy_Wh`), or a temperature's scale after its word (`TempC_SHT`).
    const last = tokens[tokens.length - 1]!;
    const afterTemp = tokens.findIndex((t, i) => i > 0 && (t === 'C' || t === 'F') && /^temp/i.test(tokens[i - 1]!));
    const at = isUnitWord(last) ? tokens.length - 1 : afterTemp;
    if (at > 0) {
      sourceUnit = tokens[at]!;
      how = `unit '${sourceUnit}' read from the name`;
      tokens.splice(at, 1);
    }
  }
  let canonical = tokens.map((t) => WORDS[t.toLowerCase()] ?? (/^[A-Z]+$/.test(t) && t.length > 1 ? capital(t.toLowerCase()) : t));
  canonical = canonical.filter((t, i) => !(t.toLowerCase() === 'relative' && canonical[i + 1] === 'relativeHumidity'));
  // battery + V → batteryVoltage; battery alone, a percentage → batteryLevel.
  if (canonical[0] === 'battery' && canonical.length === 1) {
    canonical = sourceUnit === 'V' || sourceUnit === 'mV' ? ['batteryVoltage'] : ['batteryLevel'];
  }
  if (canonical[0] === 'battery' && canonical[1]?.toLowerCase() === 'voltage') canonical = ['batteryVoltage', ...canonical.slice(2)];
  if (canonical[0] === 'air' && canonical[1]?.toLowerCase() === 'pressure') canonical = ['airPressure', ...canonical.slice(2)];
  const name = camel(canonical.length > 0 ? canonical : ['value']);
  const head = canonical[0] ?? '';
  if (type === 'number' && sourceUnit === undefined) {
    const values = leaf.values.filter((v): v is number => typeof v === 'number');
    if (head === 'batteryVoltage' && values.some((v) => v > 100)) {
      sourceUnit = 'mV';
      how = 'unit mV guessed from the values (above 100 for a voltage)';
    } else if (head === 'airPressure' && values.some((v) => v > 500 && v < 1200)) {
      sourceUnit = 'hPa';
      how = 'unit hPa guessed from the values (about 1000 for air pressure)';
    } else if (IMPLIED[head]) {
      sourceUnit = IMPLIED[head];
      how = `unit '${sourceUnit}' is what ${head} is measured in`;
    }
  }
  // A channel number is not part of what is measured: analog_in_8 measures analogIn.
  const quantity = QUANTITIES.has(head) ? head : camel(canonical.filter((t) => !/^\d+$/.test(t))) || name;
  if (sourceUnit === undefined) return { name, quantity, how };
  if ((UNITS as readonly string[]).includes(sourceUnit)) return { name, quantity, unit: sourceUnit, how };
  const conversion = CONVERSIONS[sourceUnit];
  if (!conversion) return { name, quantity, how: `the codec's unit '${sourceUnit}' has no accepted symbol: declared dimensionless, set the unit and a conversion` };
  return {
    name,
    quantity,
    unit: conversion.unit,
    ...(conversion.scale !== undefined ? { scale: conversion.scale } : {}),
    ...(conversion.offset !== undefined ? { offset: conversion.offset } : {}),
    how: `${how}, converted to ${conversion.unit}${conversion.scale !== undefined ? ` (×${conversion.scale})` : ''}${conversion.offset !== undefined ? ` (${conversion.offset})` : ''}`,
  };
}

/** A translator name from the device's name: lowercase words joined by dashes, starting with a letter. */
export function slug(text: string): string {
  const s = text
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 80);
  return /^[a-z]/.test(s) ? s : `device-${s || 'codec'}`;
}

export function proposeTranslator(input: ProposalInput): Proposal {
  const review: ReviewNote[] = [];
  const yamlExamples = uplinkExamples(input.codecYaml);
  const device = isRecord(input.deviceYaml) ? input.deviceYaml : {};
  if (yamlExamples.length === 0) review.push({ note: 'the codec YAML has no uplink examples: the proposal has no fields; add examples, or declare the spec and fieldMap by hand' });

  // What each example's data is: the codec's own output, which is what will run.
  const leaves = new Map<string, Leaf>();
  const siblings = { dropped: false };
  const valid: { example: YamlExample; index: number }[] = [];
  let ran = 0;
  yamlExamples.forEach((example, index) => {
    const label = `example ${index}${example.description ? ` (${JSON.stringify(example.description)})` : ''}`;
    const problem = exampleInputProblem((isRecord(example.input) ? example.input : {}) as ExampleInput);
    if (!isRecord(example.input) || problem) {
      review.push({ note: `${label} is left out: its input ${problem ? `${problem.field} ${problem.problem}` : 'is missing'}` });
      return;
    }
    // `decoded` has one entry per example with a valid input, in order.
    const sampled = input.decoded[ran++];
    const expected = isRecord(example.output) ? example.output.data : undefined;
    if (tooDeep(expected) || (sampled && 'ok' in sampled && tooDeep(sampled.ok.data))) {
      review.push({ note: `${label}: its data nests deeper than ${MAX_RESULT_DEPTH} levels; left out` });
      return;
    }
    valid.push({ example, index });
    if (sampled && 'ok' in sampled) {
      collectLeaves(sampled.ok.data, [], leaves, siblings);
      if (expected !== undefined && JSON.stringify(sampled.ok.data) !== JSON.stringify(expected)) {
        review.push({ note: `${label}: the codec's output differs from the YAML's; the example keeps the YAML's expectation, so the upload will say where` });
      }
    } else if (sampled && 'error' in sampled) {
      const expectsErrors = isRecord(example.output) && Array.isArray(example.output.errors) && example.output.errors.length > 0;
      if (!expectsErrors) review.push({ note: `${label}: the codec failed (${sampled.kind}): ${sampled.error}` });
      if (expected !== undefined) collectLeaves(expected, [], leaves, siblings);
    }
  });

  // Each value becomes a field: past what a spec may declare, the proposal could never be uploaded.
  if (leaves.size > MAX_SPEC_FIELDS) {
    throw ValidationError.field('code', `gives ${leaves.size} values on the examples of codecYaml, more than the ${MAX_SPEC_FIELDS} fields a spec may declare; declare the spec and fieldMap by hand`);
  }

  const spec: TranslatorSpec = {};
  const fieldMap: FieldMap = {};
  const taken = new Set<string>();
  /** The number the next repeat of a name gets, so numbering never counts up again from 2. */
  const nextNumber = new Map<string, number>();
  /** The codec path each field comes from, for the description. */
  const sourceOf = new Map<string, string>();
  for (const leaf of leaves.values()) {
    const { type, mixed, nulls } = typeOf(leaf.values);
    const g = guess(leaf, type);
    let name = g.name.slice(0, 64);
    const reserved = reservedReason(name) ?? (fieldNameProblem(name)?.includes('reserved') ? 'is reserved' : undefined);
    if (reserved) {
      const renamed = camel(['device', capital(name)]);
      review.push({ path: leaf.path, field: renamed, note: `'${name}' ${reserved}: proposed as ${renamed}` });
      name = renamed;
    }
    if (taken.has(name)) {
      let n = nextNumber.get(name) ?? 2;
      while (taken.has(`${name}${n}`)) n++;
      nextNumber.set(name, n + 1);
      review.push({ path: leaf.path, field: `${name}${n}`, note: `${name} was already proposed for another path: numbered, pick a clearer name` });
      name = `${name}${n}`;
    }
    taken.add(name);
    sourceOf.set(name, leaf.path);
    const entry: FieldSpec = type === 'number' ? { type: 'number', unit: (g.unit ?? '') as never, quantity: g.quantity } : (type as FieldSpec);
    spec[name] = entry;
    const converts = g.scale !== undefined || g.offset !== undefined;
    if (leaf.path !== name || converts || nulls) {
      fieldMap[leaf.path] = {
        field: name,
        ...(g.unit !== undefined ? { unit: g.unit } : {}),
        ...(g.scale !== undefined ? { scale: g.scale } : {}),
        ...(g.offset !== undefined ? { offset: g.offset } : {}),
        ...(nulls ? { omitNull: true } : {}),
      };
    }
    if (type === 'number') {
      review.push({ path: leaf.path, field: name, note: g.unit === undefined ? `no unit found: declared dimensionless (''); ${g.how || 'give it a unit if it has one'}` : g.how });
    }
    if (nulls) review.push({ path: leaf.path, field: name, note: 'the codec gives null here: omitNull leaves the field out then' });
    if (mixed) review.push({ path: leaf.path, field: name, note: `values of different types in the examples; declared as ${type}` });
  }
  const unmapped: UnmappedPolicy = siblings.dropped ? 'drop' : 'reject';
  if (siblings.dropped) review.push({ note: "the codec gives {value, unit, …} objects: their value is mapped, the rest (unit, display names) dropped with unmapped: 'drop'" });

  // The examples, with the YAML's expected data brought through the proposed map.
  const map = compileFieldMap(fieldMap, spec, unmapped);
  const examples: Example[] = [];
  for (const { example, index } of valid) {
    const description = example.description ?? `example ${index}`;
    const input = { fPort: example.input.fPort ?? 0, bytes: example.input.bytes ?? [] };
    const output = isRecord(example.output) ? example.output : {};
    if (Array.isArray(output.errors) && output.errors.length > 0) {
      examples.push({ description, input, errors: output.errors.map(String) });
      continue;
    }
    const data = isRecord(output.data) ? output.data : undefined;
    if (!data) {
      review.push({ note: `example ${index}: no expected data in the YAML; left out` });
      continue;
    }
    try {
      examples.push({ description, input, output: map(data).result });
    } catch (error) {
      review.push({ note: `example ${index}: its expected data does not fit the proposed map (${(error as Error).message}); left out` });
    }
  }

  const name = input.name ?? slug(typeof device.name === 'string' ? device.name : 'imported codec');
  const what = typeof device.description === 'string' ? device.description.trim().replace(/\.?$/, '.') : typeof device.name === 'string' ? `${device.name}.` : 'A device decoded by an imported codec.';
  const lines = Object.entries(spec).map(([field, entry]) => {
    const source = sourceOf.get(field) ?? field;
    const unit = typeof entry === 'string' ? entry : entry.unit === '' ? 'dimensionless' : entry.unit;
    return `- \`${field}\` (${unit}): the codec's \`${source}\``;
  });
  return {
    translator: {
      name,
      version: input.version ?? '1.0.0',
      description: `${what}\n\n### Decoded output\n${lines.join('\n')}`,
      match: { deviceModelName: name },
      spec,
      fieldMap,
      unmapped,
      examples,
      code: input.code,
    },
    review,
  };
}
