import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { platformClient, type PlatformClient } from '../../client/index.js';
import { loadOpenApi } from '../../api/openapi.js';
import type { TestPlatform } from './platform.js';

/** Every JSON answer this run checked against the document, as `METHOD template status`. */
export const checkedAnswers = new Set<string>();

const openapi = loadOpenApi();
const ajv = new Ajv({ strict: false, allErrors: false, validateSchema: false });
addFormats.default(ajv);
const BASE = 'https://platform.invalid/openapi';
ajv.addSchema({ $id: BASE, components: jsonSchema(openapi.components) });
const validators = new Map<string, ValidateFunction | null>();

const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');

/** The document's schema for an answer's JSON body, compiled once; null when the document declares none. */
function validatorOf(method: string, template: string, status: number): ValidateFunction | null {
  const key = `${method} ${template} ${status}`;
  if (validators.has(key)) return validators.get(key)!;
  const operation = (openapi.paths[template]?.[method.toLowerCase()] ?? {}) as { responses?: Record<string, { $ref?: string; content?: Record<string, { schema?: unknown }> }> };
  let response = operation.responses?.[String(status)];
  if (response?.$ref) response = (openapi.components.responses as Record<string, typeof response>)[response.$ref.split('/').pop()!];
  const schema = response?.content?.['application/json']?.schema;
  // Paths' schemas refer to `#/components/…`; compiled beside the components, so those references resolve.
  const validate = schema ? ajv.compile({ $id: `${BASE}/answers/${encodeURIComponent(pointer(key))}`, ...jsonSchema(schema) }) : null;
  validators.set(key, validate);
  return validate;
}

function objectMap(v: unknown, f: (x: unknown) => unknown): Record<string, unknown> {
  return Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, f(x)]));
}

/**
 * An OpenAPI 3.0 schema as JSON Schema for ajv: references point into the
 * components compiled under BASE, and `nullable: true` admits null.
 */
function jsonSchema(schema: unknown): any {
  if (Array.isArray(schema)) return schema.map(jsonSchema);
  if (schema === null || typeof schema !== 'object') return schema;
  const { nullable, ...rest } = schema as Record<string, unknown>;
  const out: Record<string, unknown> = Object.fromEntries(
    Object.entries(rest).map(([k, v]) => [k, k === '$ref' && typeof v === 'string' && v.startsWith('#/') ? `${BASE}${v}` : k === 'properties' ? objectMap(v, jsonSchema) : jsonSchema(v)]),
  );
  if (nullable !== true) return out;
  if (typeof out.type === 'string' && !out.$ref) {
    out.type = [out.type, 'null'];
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
    return out;
  }
  return { anyOf: [out, { type: 'null' }] };
}

/**
 * The generated REST client on a test platform, as `token`'s user (the admin
 * by default). Every JSON answer is checked against the response schema the
 * document declares for its operation and status: an answer the document
 * does not describe fails the call, so the document and the running API
 * cannot drift apart unnoticed.
 */
export function typedClient(t: TestPlatform, token: string = t.adminToken): PlatformClient {
  const client = platformClient(t.baseUrl, token);
  client.use({
    async onResponse({ request, response, schemaPath }) {
      if (!response.headers.get('content-type')?.includes('application/json')) return;
      const validate = validatorOf(request.method, schemaPath, response.status);
      if (!validate) throw new Error(`${request.method} ${schemaPath} answered ${response.status} with JSON the document does not declare`);
      const body = await response.clone().json();
      if (!validate(body)) throw new Error(`${request.method} ${schemaPath} ${response.status}: the answer does not match the document: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body).slice(0, 500)}`);
      checkedAnswers.add(`${request.method} ${schemaPath} ${response.status}`);
    },
  });
  return client;
}
