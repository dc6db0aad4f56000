import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { OpenApiDocument } from '../openapi.js';
import { TEMPLATE_NAMES, isTemplate, type Template } from '../../domain/dashboards/templates.js';
import type { Settings } from '../../domain/dashboards/dashboard.js';
import { ValidationError } from '../../domain/shared/errors.js';

/**
 * The widget template rules, compiled once from the OpenAPI document's
 * `<Template>Settings` schemas, and used both on write (which also fills
 * defaults and, for `x-unknown-settings: drop`, removes unknown settings) and
 * on read (which changes nothing and reports what no longer holds).
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

function newAjv(options: { write: boolean; drop: boolean }): Ajv {
  const ajv = new Ajv({
    strict: false,
    allErrors: false,
    useDefaults: options.write,
    removeAdditional: options.drop ? 'all' : false,
    validateSchema: false,
  });
  addFormats.default(ajv);
  addKeywords(ajv);
  return ajv;
}

export function compileTemplateRules(doc: OpenApiDocument): TemplateRules {
  const schemas = doc.components.schemas;
  const base = { $id: 'openapi', components: { schemas: structuredClone(schemas) } };
  const strictWrite = newAjv({ write: true, drop: false });
  const dropWrite = newAjv({ write: true, drop: true });
  const read = newAjv({ write: false, drop: false });
  for (const ajv of [strictWrite, dropWrite, read]) ajv.addSchema(structuredClone(base));

  const writers = new Map<Template, ValidateFunction>();
  const readers = new Map<Template, ValidateFunction>();
  for (const template of TEMPLATE_NAMES) {
    const name = schemaName(template);
    const schema = schemas[name] as Record<string, unknown> | undefined;
    if (!schema) throw new Error(`api/openapi.yaml has no components.schemas.${name} for the widget template ${template}`);
    const ref = { $ref: `openapi#/components/schemas/${name}` };
    writers.set(template, (schema['x-unknown-settings'] === 'drop' ? dropWrite : strictWrite).compile(ref));
    readers.set(template, read.compile(ref));
  }

  return {
    forWrite(template, settings, path) {
      if (!isObject(settings)) throw ValidationError.field(path, 'must be object');
      const copy = structuredClone(settings);
      const validate = writers.get(template)!;
      if (!validate(copy)) throw new ValidationError(describe(validate.errors![0]!, path));
      return copy;
    },
    problem(template, settings) {
      if (!isTemplate(template)) return `template ${template} is not a widget template`;
      if (!isObject(settings)) return 'settings must be object';
      const validate = readers.get(template)!;
      return validate(settings) ? null : describe(validate.errors![0]!, 'settings');
    },
  };
}
