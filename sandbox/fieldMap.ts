/**
 * A declared field map brings a device-repository codec's output under the
 * platform's data-model rules without touching the vendor's code: each path
 * in the codec's `data` (nested paths allowed) gets a canonical field name,
 * optionally a linear unit conversion (`scale`, then `offset`) and the unit
 * it then has, which must be the spec's unit for that field.
 *
 * Paths: keys joined by `.`; `[n]` indexes an array; a key holding `.`, `[`,
 * `]` or `"`, or starting or ending with a space, is written as a JSON string
 * in brackets. `battery_voltage.value`, `channels[0].temp`,
 * `Active Energy Import T1`, `["a.b"].c`.
 *
 * At run time (`compileFieldMap`): a mapped path's value becomes its field;
 * a top-level key the spec declares passes through as it is; anything else
 * is dropped (`unmapped: 'drop'`, reported back as dropped paths) or rejects
 * the whole translation (`unmapped: 'reject'`, the default, as for any key a
 * translator emits outside its spec).
 */
import { TranslatorError } from './errors.js';
import { MAX_RESULT_DEPTH, textProblem } from './result.js';
import { MAX_SPEC_FIELDS, UNITS, declaredType, fieldNameProblem, type SpecIssue, type TranslatorSpec } from './spec.js';
import { isRecord, show } from './values.js';

export interface FieldMapEntry {
  /** The canonical field name, declared in the spec. */
  field: string;
  /** The unit after conversion: one of UNITS, and the spec's unit for `field`. */
  unit?: string;
  /** Multiplies the codec's number (e.g. 0.001 for Wh to kWh). */
  scale?: number;
  /** Added after `scale` (e.g. -273.15 for K to °C). */
  offset?: number;
  /** A `null` from the codec leaves the field out instead of failing the translation. */
  omitNull?: boolean;
}

export type FieldMap = Record<string, FieldMapEntry>;
export const UNMAPPED_POLICIES = ['reject', 'drop'] as const;
export type UnmappedPolicy = (typeof UNMAPPED_POLICIES)[number];

type Segment = string | number;

const PLAIN_KEY = /^[^.[\]"]+$/;

/** A path's segments, or why it cannot be read. */
export function parsePath(path: string): Segment[] | string {
  const segments: Segment[] = [];
  let i = 0;
  if (path === '') return 'is an empty path';
  while (i < path.length) {
    if (path[i] === '[') {
      if (path[i + 1] === '"') {
        // A JSON string: find its closing quote, honouring escapes.
        let j = i + 2;
        while (j < path.length && path[j] !== '"') j += path[j] === '\\' ? 2 : 1;
        if (path[j + 1] !== ']') return `has an unterminated ["…"] key at position ${i}`;
        try {
          segments.push(JSON.parse(path.slice(i + 1, j + 1)) as string);
        } catch {
          return `has a malformed ["…"] key at position ${i}`;
        }
        i = j + 2;
      } else {
        const close = path.indexOf(']', i);
        const digits = close < 0 ? '' : path.slice(i + 1, close);
        if (!/^(?:0|[1-9]\d{0,5})$/.test(digits)) return `has an array index at position ${i} that is not [n] with a whole number n`;
        segments.push(Number(digits));
        i = close + 1;
      }
    } else {
      let j = i;
      while (j < path.length && path[j] !== '.' && path[j] !== '[') j++;
      const key = path.slice(i, j);
      if (key === '' || !PLAIN_KEY.test(key)) return `has an empty or unreadable key at position ${i} (write keys holding . [ ] or " as ["…"])`;
      segments.push(key);
      i = j;
    }
    if (i < path.length) {
      if (path[i] === '.') {
        i++;
        if (i === path.length || path[i] === '[' || path[i] === '.') return `has an empty key at position ${i}`;
      } else if (path[i] !== '[') {
        return `has an unexpected character at position ${i}`;
      }
    }
  }
  return segments;
}

/** The one way a path is written in messages and in the dropped list. */
export function formatPath(segments: readonly Segment[]): string {
  let out = '';
  for (const s of segments) {
    if (typeof s === 'number') out += `[${s}]`;
    else if (PLAIN_KEY.test(s) && s.trim() === s) out += out === '' ? s : `.${s}`;
    else out += `[${JSON.stringify(s)}]`;
  }
  return out;
}

const where = (path: string) => `fieldMap[${JSON.stringify(path)}]`;

/**
 * Every problem with a field map, against the spec it maps into. `reserved`
 * names fields the platform never stores from a translator, with the reason.
 */
export function checkFieldMap(fieldMap: unknown, spec: TranslatorSpec, reserved: (field: string) => string | undefined = () => undefined): SpecIssue[] {
  if (!isRecord(fieldMap)) return [{ field: 'fieldMap', problem: 'must be an object mapping codec output paths to {field, unit?, scale?, offset?, omitNull?}' }];
  const issues: SpecIssue[] = [];
  const paths = Object.keys(fieldMap);
  if (paths.length > MAX_SPEC_FIELDS) issues.push({ field: 'fieldMap', problem: `maps more than ${MAX_SPEC_FIELDS} paths` });
  const targets = new Map<string, string>();
  const parsed = new Map<string, string>();
  for (const path of paths) {
    const at = where(path);
    const entry = fieldMap[path];
    const segments = textProblem(path) ?? parsePath(path);
    if (typeof segments === 'string') issues.push({ field: at, problem: segments });
    else parsed.set(formatPath(segments), path);
    if (!isRecord(entry)) {
      issues.push({ field: at, problem: 'must be {field, unit?, scale?, offset?, omitNull?}' });
      continue;
    }
    const { field, unit, scale, offset, omitNull } = entry;
    if (typeof field !== 'string') {
      issues.push({ field: `${at}.field`, problem: 'must be the canonical field name the path maps to' });
      continue;
    }
    const why = reserved(field) ?? fieldNameProblem(field);
    if (why) {
      issues.push({ field: `${at}.field`, problem: `maps to '${field}', which ${why}` });
      continue;
    }
    const declared = spec[field];
    if (declared === undefined) issues.push({ field: `${at}.field`, problem: `maps to '${field}', which the spec does not declare` });
    const earlier = targets.get(field);
    if (earlier !== undefined) issues.push({ field: `${at}.field`, problem: `maps to '${field}', as ${where(earlier)} does: each field comes from one path` });
    else targets.set(field, path);
    if (unit !== undefined) {
      if (typeof unit !== 'string' || !(UNITS as readonly string[]).includes(unit)) {
        issues.push({ field: `${at}.unit`, problem: `is '${String(unit)}', which is not an accepted SI symbol (accepted: ${UNITS.map((u) => `'${u}'`).join(', ')}); convert with scale and offset` });
      } else if (declared !== undefined) {
        const specUnit = typeof declared === 'string' ? undefined : declared.unit;
        if (specUnit !== unit) issues.push({ field: `${at}.unit`, problem: `is '${unit}' but the spec gives ${field} ${specUnit === undefined ? 'no unit' : `the unit '${specUnit}'`}` });
      }
    }
    for (const [name, value] of [['scale', scale], ['offset', offset]] as const) {
      if (value === undefined) continue;
      if (typeof value !== 'number' || !Number.isFinite(value) || (name === 'scale' && value === 0)) {
        issues.push({ field: `${at}.${name}`, problem: name === 'scale' ? 'must be a finite number other than 0' : 'must be a finite number' });
      } else if (declared !== undefined && declaredType(declared) !== 'number') {
        issues.push({ field: `${at}.${name}`, problem: `converts numbers, but the spec declares ${field} as ${declaredType(declared)}` });
      }
    }
    if (omitNull !== undefined && typeof omitNull !== 'boolean') issues.push({ field: `${at}.omitNull`, problem: 'must be true or false' });
  }
  // A mapped path cannot also lead to another mapped path.
  for (const [text, path] of parsed) {
    for (const [other, otherPath] of parsed) {
      if (other !== text && (other.startsWith(`${text}.`) || other.startsWith(`${text}[`))) {
        issues.push({ field: where(path), problem: `is mapped, and so is ${where(otherPath)} inside it: map the value or its parts, not both` });
        break;
      }
    }
  }
  return issues;
}

interface Target {
  path: string;
  field: string;
  scale: number;
  offset: number;
  converts: boolean;
  omitNull: boolean;
  type: string;
}

interface Node {
  target?: Target;
  children?: Map<Segment, Node>;
}

export interface Mapped {
  result: Record<string, unknown>;
  /** Paths left out under `unmapped: 'drop'`, in the order met. */
  dropped: string[];
}

export type FieldMapper = (data: Record<string, unknown>) => Mapped;

const violation = (message: string, key: string) => new TranslatorError('spec', message, { key });

/**
 * 1234 × 0.001 is 1.234, not 1.2340000000000002: a conversion keeps 15
 * significant digits. One that overflows fails the decoding, as an infinity
 * from the codec does (stored, it would become null).
 */
function converted(value: number, target: Target): number {
  const out = value * target.scale + target.offset;
  if (!Number.isFinite(out)) {
    throw violation(`${target.path} (fieldMap to ${target.field}): ${value} × ${target.scale} + ${target.offset} is ${out}, not a finite number`, target.field);
  }
  return Number.isInteger(out) ? out : Number.parseFloat(out.toPrecision(15));
}

/**
 * The run-time mapping for one translator version. Throws TranslatorError
 * kind `spec` when the data breaks it. The result still goes through the
 * spec check afterwards (types, `null`, storable content).
 */
export function compileFieldMap(fieldMap: FieldMap, spec: TranslatorSpec, unmapped: UnmappedPolicy): FieldMapper {
  const root: Node = {};
  for (const [path, entry] of Object.entries(fieldMap)) {
    const segments = parsePath(path);
    if (typeof segments === 'string') throw new TranslatorError('upload', `${where(path)} ${segments}`, { key: path });
    let node = root;
    for (const segment of segments) {
      node.children ??= new Map();
      let child = node.children.get(segment);
      if (!child) node.children.set(segment, (child = {}));
      node = child;
    }
    const scale = entry.scale ?? 1;
    const offset = entry.offset ?? 0;
    const declared = spec[entry.field];
    node.target = {
      path: formatPath(segments),
      field: entry.field,
      scale,
      offset,
      converts: scale !== 1 || offset !== 0,
      omitNull: entry.omitNull === true,
      type: declared === undefined ? 'value' : declaredType(declared),
    };
  }

  return (data) => {
    const state: Walk = { spec, unmapped, result: {}, from: new Map(), dropped: [] };
    walk(state, data, root, [], 0);
    return { result: state.result, dropped: state.dropped };
  };
}

/** One mapping's state. The walk is a plain function over it: a closure made per call costs more than the walk of a small record. */
interface Walk {
  spec: TranslatorSpec;
  unmapped: UnmappedPolicy;
  result: Record<string, unknown>;
  /** Field → the path it came from, to name both when two give the same field. */
  from: Map<string, string>;
  dropped: string[];
}

function give(state: Walk, field: string, value: unknown, source: string): void {
  const earlier = state.from.get(field);
  if (earlier !== undefined) throw violation(`${field}: given both by ${earlier} and by ${source} of the codec's data`, field);
  state.from.set(field, source);
  state.result[field] = value;
}

/** Maps `value`, found at `path` (a stack: pushed and popped around each key), under `node`. */
function walk(state: Walk, value: Record<string, unknown> | unknown[], node: Node, path: Segment[], depth: number): void {
  if (depth > MAX_RESULT_DEPTH) throw violation(`${formatPath(path) || 'data'}: nests deeper than ${MAX_RESULT_DEPTH} levels`, formatPath(path));
  const array = Array.isArray(value);
  const keys: Segment[] = array ? Array.from(value.keys()) : Object.keys(value);
  for (const key of keys) {
    const item = (value as Record<Segment, unknown>)[key];
    if (item === undefined) continue;
    const child = node.children?.get(key);
    if (child?.target) {
      const t = child.target;
      if (item === null) {
        if (t.omitNull) continue;
        throw violation(`${t.path} (fieldMap to ${t.field}): null is not a valid ${t.type} (set omitNull: true in its fieldMap entry to leave the field out)`, t.field);
      }
      if (t.converts) {
        if (typeof item !== 'number') throw violation(`${t.path} (fieldMap to ${t.field}): scale and offset convert numbers, got ${show(item)}`, t.field);
        give(state, t.field, converted(item, t), t.path);
      } else {
        give(state, t.field, item, t.path);
      }
    } else if (child?.children && typeof item === 'object' && item !== null) {
      path.push(key);
      walk(state, item as Record<string, unknown>, child, path, depth + 1);
      path.pop();
    } else if (depth === 0 && typeof key === 'string' && !child && Object.hasOwn(state.spec, key)) {
      give(state, key, item, `its own key ${key}`);
    } else {
      path.push(key);
      const text = formatPath(path);
      path.pop();
      if (state.unmapped === 'drop') state.dropped.push(text);
      else throw violation(`${text}: in the codec's data but neither in the fieldMap nor declared in the spec (map it, declare it, or upload with unmapped: drop)`, text);
    }
  }
}
