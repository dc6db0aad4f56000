import fc from 'fast-check';
import type { OpenApiDocument } from '../../api/openapi.js';

/**
 * What the two fuzz suites (`fuzz-rest.test.ts`, `fuzz-mqtt.test.ts`) share:
 * hostile text, numbers and JSON, a JSON writer that can say what
 * `JSON.stringify` cannot, and arbitraries derived from the OpenAPI
 * document's schemas, valid ones and ones broken at a single place.
 *
 * Runs are reproducible: the seed is fixed (`FUZZ_SEED` overrides it) and the
 * number of runs bounded (`FUZZ_RUNS` scales it), so CI sees the same cases
 * every time and a failure names the seed and the shrunk counterexample.
 */
export const FUZZ_SEED = Number(process.env.FUZZ_SEED ?? 20261124);
export const runsScaled = (runs: number): number => Math.max(1, Math.round(runs * Number(process.env.FUZZ_RUNS_FACTOR ?? 1)));

/** A JSON token written as it is: `1e309`, `-0`, `9007199254740993` or 10,000 levels of nesting, which `JSON.stringify` cannot produce. */
export class Raw {
  constructor(readonly text: string) {}
  [fc.toStringMethod](): string {
    return this.text.length > 48 ? `raw(${JSON.stringify(this.text.slice(0, 24))}…${this.text.length} chars)` : `raw(${this.text})`;
  }
}

/** `unit` repeated `times` times (after `prefix`, for strings): a string of it, or an array of copies. Shown short in counterexamples. */
export class Rep {
  constructor(
    readonly unit: unknown,
    readonly times: number,
    readonly prefix = '',
  ) {}
  [fc.toStringMethod](): string {
    return `rep(${this.prefix ? `${JSON.stringify(this.prefix)} + ` : ''}${fc.stringify(this.unit)}, ${this.times})`;
  }
}

/** Sets an own property, even `__proto__`. */
export function put<T extends object>(target: T, key: string, value: unknown): T {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return target;
}

/** JSON text of a generated value, with `Raw` tokens as they are and `Rep` expanded. */
export function jsonText(value: unknown): string {
  if (value instanceof Raw) return value.text;
  if (value instanceof Rep) {
    if (typeof value.unit === 'string') return JSON.stringify(value.prefix + value.unit.repeat(value.times));
    const item = jsonText(value.unit);
    return `[${new Array<string>(value.times).fill(item).join(',')}]`;
  }
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.keys(value)
      .map((k) => `${JSON.stringify(k)}:${jsonText((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A generated scalar as the text of a query, path or header value. */
export function textOf(value: unknown): string {
  if (value instanceof Rep) return typeof value.unit === 'string' ? value.prefix + value.unit.repeat(value.times) : jsonText(value);
  if (value instanceof Raw) return value.text;
  if (typeof value === 'string') return value;
  return jsonText(value);
}

/**
 * Percent-encodes every UTF-16 unit, lone surrogates included: those become
 * the three bytes a careless encoder writes for them (`%ED%A0%80`), which are
 * not UTF-8; that is what a hostile client sends.
 */
export function percent(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const next = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) {
      out += encodeURIComponent(s[i]! + s[i + 1]!);
      i++;
    } else if (c >= 0xd800 && c <= 0xdfff) {
      out += [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 0x3f), 0x80 | (c & 0x3f)].map((b) => `%${b.toString(16).toUpperCase()}`).join('');
    } else {
      out += encodeURIComponent(s[i]!);
    }
  }
  return out;
}

/** Text that breaks storage, parsing, queries or rendering when it is not handled at the edge. */
export const ODD_TEXT = [
  '',
  ' ',
  '\t\r\n',
  'a\u0000b',
  '\u0000',
  '\ud800',
  'x\udfffy',
  '\udc00\ud800',
  '😀',
  '👩‍👩‍👧‍👦',
  'e\u0301',
  '\u202eevil',
  '\u200b',
  '\ufeff',
  '\u0001\u001f\u007f',
  "' OR '1'='1",
  "'; DROP TABLE devices; --",
  '%',
  '_%\\',
  '\\',
  '.*',
  '(a+)+$',
  '[',
  '(?<x>',
  '$where',
  '${x}',
  '__proto__',
  'constructor',
  '../..',
  '~||~',
  'null',
  'NaN',
  '1e309',
  '-0',
  '{"a":1}',
  '<script>alert(1)</script>',
  'ffffffffffffffffffffffff',
  'FFFFFFFFFFFFFFFFFFFFFFFF',
  '00000000-0000-0000-0000-000000000000',
  'a/b',
  '+',
  '#',
  '$SYS/x',
];

/** Single characters to build odd strings from: NUL, both halves of a surrogate pair, metacharacters. */
const ODD_UNITS = ['\u0000', '\ud800', '\udc00', 'a', 'Z', '0', '😀', "'", '"', '%', '_', '\\', '.', '*', '(', '/', '+', '#', '$', ' ', '\u00e9'];

/** An odd string; `maxLength` adds strings just past it. */
export function oddText(maxLength?: number): fc.Arbitrary<unknown> {
  const past = maxLength === undefined ? [] : [fc.constantFrom('a', '😀', '\u0000').map((u) => new Rep(u, maxLength + 1))];
  return fc.oneof(
    { arbitrary: fc.constantFrom(...ODD_TEXT), weight: 4 },
    { arbitrary: fc.string({ unit: 'binary', maxLength: 24 }), weight: 1 },
    { arbitrary: fc.string({ unit: fc.constantFrom(...ODD_UNITS), maxLength: 16 }), weight: 2 },
    // Long text, and long text whose surrogate pairs straddle every even cut (a cut there leaves half a pair).
    { arbitrary: fc.constantFrom(new Rep('a', 300_000), new Rep('\u0000', 5000), new Rep('😀', 70_000), new Rep('😀', 3000, 'a')), weight: 1 },
    ...past.map((arbitrary) => ({ arbitrary, weight: 2 })),
  );
}

/** An object key that a careless walk, query or column would trip on. */
export const oddKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(...ODD_TEXT, 'k'.repeat(257), 'a.b', '$set', '_id', 'rabbitRouting', 'createdAt', 'secret', 'prototype', 'toString', 'hasOwnProperty'),
  fc.string({ unit: fc.constantFrom(...ODD_UNITS), minLength: 1, maxLength: 8 }),
);

/** Numbers past what a double, an int4, a bigint or a bound allows, and the ones at the bounds. */
export function oddNumber(bounds: { minimum?: number; maximum?: number; integer?: boolean } = {}): fc.Arbitrary<unknown> {
  const near: unknown[] = [];
  for (const b of [bounds.minimum, bounds.maximum]) if (b !== undefined) near.push(b, b - 1, b + 1, b - 0.5, b + 0.5);
  if (bounds.integer) near.push(1.5, 0.1);
  return fc.oneof(
    fc.constantFrom(
      new Raw('1e309'),
      new Raw('-1e309'),
      new Raw('-0'),
      new Raw('9007199254740993'),
      new Raw('1e-400'),
      new Raw('123456789012345678901234567890'),
      new Raw('1E2'),
      1e20,
      -1e20,
      2 ** 31,
      -(2 ** 31) - 1,
      2 ** 63,
      5e-324,
      1.7976931348623157e308,
      -1,
    ),
    ...(near.length ? [fc.constantFrom(...near)] : []),
  );
}

/** Arrays and objects nested just inside, just past and far past the depth cap of 32. */
export const deepNesting: fc.Arbitrary<Raw> = fc.constantFrom(31, 33, 200, 10_000).chain((n) =>
  fc.constantFrom(new Raw('['.repeat(n) + ']'.repeat(n)), new Raw('{"a":'.repeat(n) + '1' + '}'.repeat(n))),
);

/** A value of some other JSON type than the one asked for. */
export const wrongType: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.constantFrom<unknown>(null, true, false, 0, 1, -1, '', 'x', '1', [], {}, [null], { a: 1 }, [[]]), weight: 4 },
  { arbitrary: deepNesting, weight: 1 },
);

/** Any JSON value, odd ones included: what a device or a client might send anywhere. */
export const oddJson: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { arbitrary: fc.oneof(fc.boolean(), fc.constant(null), fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ maxLength: 12 })), weight: 4 },
    { arbitrary: oddText(), weight: 2 },
    { arbitrary: oddNumber(), weight: 1 },
    { arbitrary: deepNesting, weight: 1 },
    { arbitrary: fc.array(tie('value'), { maxLength: 4 }), weight: 1 },
    { arbitrary: fc.dictionary(fc.oneof(fc.string({ minLength: 1, maxLength: 8 }), oddKey), tie('value'), { maxKeys: 4, noNullPrototype: true }).map(owned), weight: 1 },
  ),
})).value;

/** A copy whose keys are all own data properties (a `__proto__` key stays a key). */
function owned(o: Record<string, unknown>): Record<string, unknown> {
  const out = {};
  for (const k of Object.keys(o)) put(out, k, o[k]);
  return out;
}

/**
 * A translator that reflects the uplink's bytes into its result, so whatever
 * odd text or shape the bytes carry reaches the platform's check of
 * translator results; bytes that are JSON with `updates` become sub-device
 * updates (`additionalDeviceUpdates`), as a gateway's decoder returns them.
 */
export const ECHO_TRANSLATOR = {
  spec: { text: 'string', echo: 'object' },
  code: `function translate({ encodedData }) {
  const text = Buffer.from(encodedData.hexEncoded, 'hex').toString('utf8');
  let echo = null;
  try { echo = JSON.parse(text); } catch (e) {}
  if (echo && Array.isArray(echo.updates)) return { result: { text }, additionalDeviceUpdates: echo.updates };
  return { result: { text, echo } };
}`,
};

/** Uplink bytes (as hex) for the echo translator: odd text, odd JSON, deep nesting, sub-device updates for `identifiers` and odd ones. */
export function echoUplinkHex(identifiers: string[]): fc.Arbitrary<string> {
  const hexOf = (a: fc.Arbitrary<unknown>) => a.map((v) => Buffer.from(typeof v === 'string' ? v : jsonText(v), 'utf8').toString('hex'));
  const identifier = fc.oneof(...(identifiers.length ? [{ arbitrary: fc.constantFrom(...identifiers), weight: 3 }] : []), { arbitrary: oddText().map(textOf), weight: 1 });
  // Results within the spec (`text`, `echo`) carrying odd content, or outside it.
  const odd = <T>(usual: fc.Arbitrary<T>) => fc.oneof({ arbitrary: usual, weight: 2 }, { arbitrary: oddJson, weight: 1 });
  const result = odd(fc.record({ text: fc.oneof({ arbitrary: fc.string(), weight: 2 }, { arbitrary: oddText(), weight: 1 }), echo: odd(fc.object({ maxDepth: 2 })) }, { requiredKeys: [] }));
  const updates = fc.array(fc.record({ identifier, result }), { minLength: 1, maxLength: 3 }).map((u) => ({ updates: u }));
  return fc.oneof(hexOf(oddText()), hexOf(oddJson), hexOf(deepNesting), { arbitrary: hexOf(updates), weight: 3 });
}

type Schema = Record<string, any>;

/** An arbitrary, or one made from the schema arbitraries (to reuse a sub-schema's). */
type Extra = fc.Arbitrary<unknown> | ((arbs: SchemaArbitraries) => fc.Arbitrary<unknown>);

export interface SchemaArbitraryOptions {
  /** Further values for a named component schema (`Id` → ids of real resources), mixed with what its definition generates. */
  named?: Record<string, Extra>;
  /** Further values for a property, keyed `<Schema>.<property>` (`ReservedTopicCreate.topic`), mixed with its definition's. */
  hints?: Record<string, Extra>;
}

/**
 * Arbitraries derived from the document's schemas: `valid` values (within
 * every type, bound, pattern, format and required property the schema
 * states), and `broken` ones: valid everywhere but at one place, where a
 * value has the wrong type, a number is past its bounds or not finite, a
 * string is overlong or odd, a required property is missing or an unknown one
 * added, an array is at or past its cap, or nesting is too deep.
 */
export class SchemaArbitraries {
  private readonly memo = new Map<string, fc.Arbitrary<unknown>>();

  constructor(
    private readonly doc: OpenApiDocument,
    private readonly options: SchemaArbitraryOptions = {},
  ) {}

  /** The hint given for `where`, if any. */
  hint(where: string): fc.Arbitrary<unknown> | undefined {
    return this.extra(this.options.hints?.[where]);
  }

  private extra(e: Extra | undefined): fc.Arbitrary<unknown> | undefined {
    return typeof e === 'function' ? e(this) : e;
  }

  /** A valid value, or (two times in three) one broken at one place. */
  any(schema: Schema, where = ''): fc.Arbitrary<unknown> {
    return fc.oneof({ arbitrary: this.valid(schema, where), weight: 1 }, { arbitrary: this.broken(schema, where), weight: 2 });
  }

  /** The schema with `$ref` followed and `allOf` merged, and the name of the component it came from. */
  resolve(schema: Schema): { schema: Schema; name?: string } {
    if (typeof schema?.$ref === 'string') {
      const name = schema.$ref.split('/').pop()!;
      const target = this.doc.components.schemas[name] as Schema | undefined;
      if (!target) throw new Error(`the document has no schema ${schema.$ref}`);
      const { $ref: _, ...rest } = schema;
      const inner = this.resolve(target);
      return { schema: { ...inner.schema, ...rest }, name: inner.name ?? name };
    }
    if (Array.isArray(schema?.allOf)) {
      const { allOf, ...rest } = schema;
      let merged: Schema = {};
      let name: string | undefined;
      for (const part of allOf as Schema[]) {
        const r = this.resolve(part);
        name ??= r.name;
        merged = {
          ...merged,
          ...r.schema,
          properties: { ...merged.properties, ...r.schema.properties },
          required: [...(merged.required ?? []), ...(r.schema.required ?? [])],
        };
      }
      if (Object.keys(merged.properties).length === 0) delete merged.properties;
      return { schema: { ...merged, ...rest }, name };
    }
    return { schema: schema ?? {} };
  }

  valid(schema: Schema, where = ''): fc.Arbitrary<unknown> {
    return this.cached('valid', schema, where, () => {
      const { schema: s, name } = this.resolve(schema);
      const here = name ?? where;
      let arb = this.validOf(s, here);
      const extra = [name ? this.extra(this.options.named?.[name]) : undefined, this.hint(where)].filter((a): a is fc.Arbitrary<unknown> => !!a);
      if (extra.length) arb = fc.oneof({ arbitrary: fc.oneof(...extra), weight: 3 }, { arbitrary: arb, weight: 1 });
      if (s.nullable) arb = fc.oneof({ arbitrary: arb, weight: 5 }, { arbitrary: fc.constant(null), weight: 1 });
      return arb;
    });
  }

  broken(schema: Schema, where = ''): fc.Arbitrary<unknown> {
    return this.cached('broken', schema, where, () => {
      const { schema: s, name } = this.resolve(schema);
      return fc.oneof({ arbitrary: this.brokenOf(s, name ?? where), weight: 6 }, { arbitrary: wrongType, weight: 1 });
    });
  }

  private cached(kind: string, schema: Schema, where: string, make: () => fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
    const key = `${kind}\u0000${where}\u0000${JSON.stringify(schema)}`;
    let arb = this.memo.get(key);
    if (!arb) {
      // A placeholder first, so a schema that refers to itself ends instead of recursing.
      this.memo.set(key, fc.constant(null));
      arb = make();
      this.memo.set(key, arb);
    }
    return arb;
  }

  private typeOf(s: Schema): string | undefined {
    if (s.type) return s.type;
    if (s.properties || s.additionalProperties !== undefined) return 'object';
    if (s.items) return 'array';
    return undefined;
  }

  private validOf(s: Schema, where: string): fc.Arbitrary<unknown> {
    if (Array.isArray(s.oneOf) || Array.isArray(s.anyOf)) return fc.oneof(...(s.oneOf ?? s.anyOf).map((alt: Schema) => this.valid(alt, where)));
    if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
    switch (this.typeOf(s)) {
      case 'string':
        return validString(s);
      case 'integer':
        return fc.integer({ min: Math.max(s.minimum ?? -1_000_000, Number.MIN_SAFE_INTEGER), max: Math.min(s.maximum ?? 1_000_000, Number.MAX_SAFE_INTEGER) });
      case 'number':
        return fc.double({ min: s.minimum ?? -1e6, max: s.maximum ?? 1e6, noNaN: true, noDefaultInfinity: true });
      case 'boolean':
        return fc.boolean();
      case 'array': {
        const minLength = s.minItems ?? 0;
        const maxLength = Math.max(minLength, Math.min(s.maxItems ?? 4, minLength + 3));
        const item = this.valid(s.items ?? {}, `${where}[]`);
        return s.uniqueItems ? fc.uniqueArray(item, { minLength, maxLength, selector: (v) => jsonText(v) }) : fc.array(item, { minLength, maxLength });
      }
      case 'object':
        return this.validObject(s, where);
      default:
        return fc.jsonValue({ maxDepth: 2 });
    }
  }

  private validObject(s: Schema, where: string): fc.Arbitrary<unknown> {
    const props = (s.properties ?? {}) as Record<string, Schema>;
    const required = ((s.required ?? []) as string[]).filter((k) => k in props);
    const model = Object.fromEntries(Object.entries(props).map(([k, p]) => [k, this.valid(p, `${where}.${k}`)]));
    let arb: fc.Arbitrary<Record<string, unknown>> = fc.record(model, { requiredKeys: required, noNullPrototype: true }) as fc.Arbitrary<Record<string, unknown>>;
    // A required property the schema does not describe (`DeviceCreate` requires `name` through `allOf`) is a plain string.
    for (const k of (s.required ?? []) as string[]) if (!(k in props)) arb = arb.map((o) => ({ ...o, [k]: 'fuzz' }));
    if (s.additionalProperties === true || typeof s.additionalProperties === 'object') {
      const value = s.additionalProperties === true ? fc.jsonValue({ maxDepth: 2 }) : this.valid(s.additionalProperties, `${where}.*`);
      const extra = fc.dictionary(fc.stringMatching(/^[a-z][A-Za-z0-9]{0,11}$/), value, { maxKeys: 3, noNullPrototype: true });
      arb = fc.tuple(arb, extra).map(([o, e]) => ({ ...e, ...o }));
    }
    if (s.minProperties) arb = arb.filter((o) => Object.keys(o).length >= s.minProperties);
    return this.withSettings(s, arb, (schema, at) => this.valid(schema, at));
  }

  /**
   * A widget's `settings` follow the schema named after its `template`
   * (`deviceValue` → `DeviceValueSettings`), as the document says; the
   * generated settings match the generated template.
   */
  private withSettings(s: Schema, arb: fc.Arbitrary<Record<string, unknown>>, settings: (schema: Schema, where: string) => fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
    const template = s.properties?.template;
    if (!template || this.resolve(s.properties?.settings ?? {}).name !== 'WidgetSettings') return arb;
    const templates = this.resolve(template).schema.enum as string[] | undefined;
    if (!templates) return arb;
    return fc.tuple(arb, fc.constantFrom(...templates)).chain(([o, t]) => {
      const name = `${t[0]!.toUpperCase()}${t.slice(1)}Settings`;
      if (!this.doc.components.schemas[name]) return fc.constant(o);
      return settings({ $ref: `#/components/schemas/${name}` }, name).map((v) => ({ ...o, template: t, settings: v }));
    });
  }

  private brokenOf(s: Schema, where: string): fc.Arbitrary<unknown> {
    const type = this.typeOf(s);
    const options: fc.Arbitrary<unknown>[] = [];
    if (Array.isArray(s.enum)) {
      options.push(fc.constantFrom(...s.enum.filter((v: unknown) => typeof v === 'string').flatMap((v: string) => [v.toUpperCase(), `${v} `, `${v}\u0000`])), oddText());
    }
    if (Array.isArray(s.oneOf) || Array.isArray(s.anyOf)) options.push(...(s.oneOf ?? s.anyOf).map((alt: Schema) => this.broken(alt, where)));
    switch (type) {
      case 'string':
        options.push(oddText(s.maxLength));
        if (s.minLength) options.push(fc.constant('x'.repeat(s.minLength - 1)));
        if (s.format === 'date-time') options.push(fc.constantFrom('0000-00-00T00:00:00Z', '0000-01-01T00:00:00Z', '9999-12-31T23:59:60Z', '2024-02-30T00:00:00Z', '275760-09-13T00:00:00.001Z', '-271821-04-19T00:00:00Z', '2024-02-30T25:61:61Z', '1e309', '2024-01-01T00:00:00+99:99'));
        break;
      case 'integer':
      case 'number':
        options.push(oddNumber({ minimum: s.minimum, maximum: s.maximum, integer: type === 'integer' }), fc.constantFrom('1', '1e309'));
        break;
      case 'array': {
        const item = this.valid(s.items ?? {}, `${where}[]`);
        const lengths = [s.maxItems, s.maxItems === undefined ? 10_001 : s.maxItems + 1, s.minItems ? s.minItems - 1 : undefined].filter((n): n is number => n !== undefined && n <= 20_000);
        options.push(fc.tuple(item, fc.constantFrom(...lengths)).map(([v, n]) => new Rep(v, n)));
        options.push(fc.tuple(this.valid(s, where), this.broken(s.items ?? {}, `${where}[]`)).map(([a, b]) => [...(Array.isArray(a) ? a : []), b]));
        break;
      }
      case 'object':
        options.push(...this.brokenObject(s, where));
        break;
      default:
        options.push(oddJson);
    }
    options.push(deepNesting);
    return fc.oneof(...options);
  }

  private brokenObject(s: Schema, where: string): fc.Arbitrary<unknown>[] {
    const valid = this.valid(s, where) as fc.Arbitrary<Record<string, unknown>>;
    const props = Object.keys(s.properties ?? {});
    const required = (s.required ?? []) as string[];
    const out: fc.Arbitrary<unknown>[] = [];
    if (required.length) {
      out.push(fc.tuple(valid, fc.constantFrom(...required)).map(([o, k]) => {
        const copy = { ...o };
        delete copy[k];
        return copy;
      }));
    }
    out.push(fc.tuple(valid, oddKey, oddJson).map(([o, k, v]) => put({ ...o }, k, v)));
    if (props.length) {
      const one = fc.constantFrom(...props).chain((k) => fc.tuple(valid, fc.constant(k), this.broken(s.properties[k], `${where}.${k}`)));
      out.push(one.map(([o, k, v]) => put({ ...o }, k, v)));
    }
    const settings = this.withSettings(s, valid, (schema, at) => this.broken(schema, at));
    if (settings !== valid) out.push(settings);
    return out;
  }
}

function validString(s: Schema): fc.Arbitrary<string> {
  const minLength = s.minLength ?? 0;
  const maxLength = s.maxLength ?? Math.max(minLength, 40);
  const fits = (v: string) => [...v].length >= minLength && [...v].length <= maxLength;
  switch (s.format) {
    case 'email':
      return fc.emailAddress().filter(fits);
    case 'date-time':
      return fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2100-01-01T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
    case 'uuid':
      return fc.uuid();
    case 'uri':
      // Somewhere that answers at once, so nothing a fuzzed channel sends waits on the network.
      return fc.webPath().map((p) => `http://127.0.0.1:9${p.startsWith('/') ? p : `/${p}`}`).filter(fits);
    case 'binary':
      return fc.constant('');
  }
  if (s.pattern) return fc.stringMatching(new RegExp(s.pattern)).filter(fits);
  return fc.oneof({ arbitrary: fc.string({ minLength, maxLength: Math.min(maxLength, minLength + 24) }), weight: 3 }, { arbitrary: fc.string({ unit: 'grapheme', minLength, maxLength: Math.min(maxLength, minLength + 12) }), weight: 1 });
}
