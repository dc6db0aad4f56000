import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { OpenApiDocument } from '../openapi.js';
import { TEMPLATE_NAMES, isTemplate, type Template } from '../../domain/dashboards/templates.js';
import type { Settings } from '../../domain/dashboards/dashboard.js';
import { ValidationError } from '../../domain/shared/errors.js';

/**
 * The widget template rules, compiled once from the OpenAPI document's
 * `<Template>Settings` schemas into one validator per template, used both on
 * write (which keeps the checked copy: defaults filled and, for
 * `x-unknown-settings: drop`, unknown settings removed first) and on read
 * (which checks a copy of the stored settings, so it changes nothing, and
 * reports what no longer holds).
 */
export interface TemplateRules {
  /** Checks settings for a write: a copy with every default filled (and unknown settings dropped where the template drops them); `ValidationError` naming the first failing setting under `path`. */
  forWrite(template: Template, settings: unknown, path: string): Settings;
  /** Checks stored settings against today's rules; `null` when they hold, else which setting fails and why. */
  problem(template: string, settings: unknown): string | null;
}

const schemaName = (template: Template) => `${template[0]!.toUpperCase()}${template.slice(1)}Settings`;

/** A JSON pointer (`/items/0/field`) as a dotted path (`items.0.field`). */
const dotted = (pointer: string): string[] =>
  pointer
    .split('/')
    .filter(Boolean)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'));

/** One ajv error as the contract's `<field> <why>`, worded for people. */
export function describe(error: ErrorObject, prefix: string): string {
  const at = (...more: string[]) => [prefix, ...dotted(error.instancePath), ...more].filter(Boolean).join('.');
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return `${at(String(params.missingProperty))} is required`;
    case 'x-required-when':
      return `${at(String(params.missingProperty))} is required when ${String(params.when)}`;
    case 'x-key-matches':
      return `${at(String(params.key), String(params.field))} must equal its key '${String(params.key)}'`;
    case 'additionalProperties':
      return `${at(String(params.additionalProperty))} is not allowed`;
    case 'enum':
      return `${at()} must be one of ${(params.allowedValues as unknown[]).join(', ')}`;
    case 'type':
      return `${at()} must be ${String(params.type).replace(',', ' or ')}`;
    case 'minimum':
      return `${at()} must be at least ${String(params.limit)}`;
    case 'maximum':
      return `${at()} must be at most ${String(params.limit)}`;
    case 'minLength':
      return `${at()} must have at least ${String(params.limit)} character${params.limit === 1 ? '' : 's'}`;
    case 'maxLength':
      return `${at()} must have at most ${String(params.limit)} characters`;
    case 'minItems':
      return `${at()} must have at least ${String(params.limit)} item${params.limit === 1 ? '' : 's'}`;
    default:
      return `${at()} ${error.message ?? 'is invalid'}`;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The two keywords the document adds to JSON Schema for rules it cannot state otherwise (see the comment above the settings schemas). */
type KeywordCheck<S> = ((schema: S, data: Record<string, unknown>) => boolean) & { errors?: Partial<ErrorObject>[] };

function addKeywords(ajv: Ajv): void {
  const requiredWhen: KeywordCheck<Record<string, Record<string, unknown>>> = (schema, data) => {
    for (const [setting, when] of Object.entries(schema)) {
      const [other, value] = Object.entries(when)[0]!;
      if (data[other] === value && data[setting] === undefined) {
        requiredWhen.errors = [{ keyword: 'x-required-when', params: { missingProperty: setting, when: `${other} is ${String(value)}` } }];
        return false;
      }
    }
    return true;
  };
  const keyMatches: KeywordCheck<string> = (field, data) => {
    for (const [key, entry] of Object.entries(data)) {
      if (isObject(entry) && entry[field] !== undefined && entry[field] !== key) {
        keyMatches.errors = [{ keyword: 'x-key-matches', params: { key, field } }];
        return false;
      }
    }
    return true;
  };
  ajv.addKeyword({ keyword: 'x-required-when', type: 'object', schemaType: 'object', errors: true, validate: requiredWhen });
  ajv.addKeyword({ keyword: 'x-key-matches', type: 'object', schemaType: 'string', errors: true, validate: keyMatches });
  ajv.addKeyword({ keyword: 'x-unknown-settings', schemaType: 'string' });
}

function newAjv(): Ajv {
  const ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true, validateSchema: false });
  addFormats.default(ajv);
  addKeywords(ajv);
  return ajv;
}

type Schema = Record<string, unknown>;

const REF_PREFIX = '#/components/schemas/';

/** `schema` with its `$ref` (to another component) followed. */
function resolved(schema: unknown, schemas: Record<string, unknown>): Schema | undefined {
  for (let s = schema, hops = 0; isObject(s) && hops < 32; hops++) {
    if (typeof s.$ref !== 'string') return s;
    s = schemas[s.$ref.slice(REF_PREFIX.length)];
  }
  return undefined;
}

/**
 * `x-unknown-settings: drop`: removes from `data`, at every level, what the
 * schema does not name, as a write of such a template stores it. The
 * validator itself removes nothing, so the same validator judges stored
 * settings on read as they are.
 */
function dropUnknown(data: unknown, schema: unknown, schemas: Record<string, unknown>): void {
  const s = resolved(schema, schemas);
  if (!s) return;
  if (Array.isArray(data)) {
    if (s.items !== undefined) for (const item of data) dropUnknown(item, s.items, schemas);
    return;
  }
  if (!isObject(data) || !isObject(s.properties)) return;
  const properties = s.properties;
  for (const key of Object.keys(data)) {
    if (Object.hasOwn(properties, key)) dropUnknown(data[key], properties[key], schemas);
    else delete data[key];
  }
}

/**
 * Reads run the write validator on a copy, which fills defaults first. That
 * gives the verdict of a check without defaults only if no default can stand
 * in for something a rule asks for: a setting that is both required (always,
 * or by `x-required-when`) and defaulted would pass on read when missing, and
 * a defaulted setting that `x-required-when` looks at could make another
 * setting required where it was not. Such a schema is refused at start-up.
 */
function checkDefaultsAreNeutral(schema: unknown, schemas: Record<string, unknown>, at: string, seen = new Set<unknown>()): void {
  if (typeof schema !== 'object' || schema === null || seen.has(schema)) return;
  seen.add(schema);
  if (Array.isArray(schema)) {
    schema.forEach((s, i) => checkDefaultsAreNeutral(s, schemas, `${at}/${i}`, seen));
    return;
  }
  const s = schema as Schema;
  if (typeof s.$ref === 'string') checkDefaultsAreNeutral(schemas[s.$ref.slice(REF_PREFIX.length)], schemas, `${at}/$ref`, seen);
  const properties = isObject(s.properties) ? s.properties : {};
  const asked = new Set<string>(Array.isArray(s.required) ? (s.required as string[]) : []);
  const lookedAt = new Set<string>();
  if (isObject(s['x-required-when'])) {
    for (const [setting, when] of Object.entries(s['x-required-when'])) {
      asked.add(setting);
      if (isObject(when)) for (const other of Object.keys(when)) lookedAt.add(other);
    }
  }
  for (const name of [...asked, ...lookedAt]) {
    if (resolved(properties[name], schemas)?.default !== undefined) {
      throw new Error(`api/openapi.yaml ${at}: ${name} has a default and a rule depends on whether it is given, so stored settings could not be judged on read`);
    }
  }
  for (const [key, value] of Object.entries(s)) if (key !== '$ref') checkDefaultsAreNeutral(value, schemas, `${at}/${key}`, seen);
}

export function compileTemplateRules(doc: OpenApiDocument): TemplateRules {
  const schemas = doc.components.schemas;
  const ajv = newAjv();
  ajv.addSchema({ $id: 'openapi', components: { schemas: structuredClone(schemas) } });

  // One compiled validator per template, for writes and reads alike.
  const validators = new Map<Template, { validate: ValidateFunction; schema: Schema; drops: boolean }>();
  for (const template of TEMPLATE_NAMES) {
    const name = schemaName(template);
    const schema = schemas[name] as Schema | undefined;
    if (!schema) throw new Error(`api/openapi.yaml has no components.schemas.${name} for the widget template ${template}`);
    checkDefaultsAreNeutral(schema, schemas, `components.schemas.${name}`);
    const validate = ajv.compile({ $ref: `openapi${REF_PREFIX}${name}` });
    validators.set(template, { validate, schema, drops: schema['x-unknown-settings'] === 'drop' });
  }

  return {
    forWrite(template, settings, path) {
      if (!isObject(settings)) throw ValidationError.field(path, 'must be object');
      const copy = structuredClone(settings);
      const { validate, schema, drops } = validators.get(template)!;
      if (drops) dropUnknown(copy, schema, schemas);
      if (!validate(copy)) throw new ValidationError(describe(validate.errors![0]!, path));
      return copy;
    },
    problem(template, settings) {
      if (!isTemplate(template)) return `template ${template} is not a widget template`;
      if (!isObject(settings)) return 'settings must be object';
      // The validator fills defaults: it works on a copy, so what is stored is never changed.
      const { validate } = validators.get(template)!;
      return validate(structuredClone(settings)) ? null : describe(validate.errors![0]!, 'settings');
    },
  };
}
