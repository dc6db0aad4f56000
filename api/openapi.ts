import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { ValidationError } from '../domain/shared/errors.js';
import { describe } from './dashboards/rules.js';

/** The OpenAPI document, the single source of request shapes; the composition root reads it once and hands it to what needs it. */
export type OpenApiDocument = {
  paths: Record<string, Record<string, unknown>>;
  components: { schemas: Record<string, unknown> } & Record<string, unknown>;
} & Record<string, unknown>;

export function loadOpenApi(): OpenApiDocument {
  return parse(readFileSync(new URL('./openapi.yaml', import.meta.url), 'utf8')) as OpenApiDocument;
}

/** One operation of the document: its path template and its object (`x-resource`, `security`, …). */
export interface Operation {
  method: string;
  template: string;
  spec: Record<string, unknown>;
  /** Its parameters and its path's, `$ref`s resolved: what a check of the query or path reads. */
  parameters: Parameter[];
}

export interface Parameter {
  name: string;
  in: string;
  required?: boolean;
  allowEmptyValue?: boolean;
  schema?: { type?: string } & Record<string, unknown>;
}

/** Every operation of the document, with its parameters and its path's, `$ref`s resolved. */
export function operationsOf(openapi: OpenApiDocument): Operation[] {
  const operations: Operation[] = [];
  const shared = (openapi.components.parameters ?? {}) as Record<string, Parameter>;
  const resolve = (p: Parameter & { $ref?: string }): Parameter => (p.$ref ? shared[p.$ref.split('/').pop()!]! : p);
  for (const [template, item] of Object.entries(openapi.paths)) {
    const onPath = ((item.parameters ?? []) as Parameter[]).map(resolve);
    for (const [method, spec] of Object.entries(item)) {
      if (method === 'parameters' || typeof spec !== 'object' || spec === null) continue;
      const own = (((spec as { parameters?: Parameter[] }).parameters ?? []) as Parameter[]).map(resolve);
      const parameters = [...onPath.filter((p) => !own.some((o) => o.name === p.name && o.in === p.in)), ...own];
      operations.push({ method: method.toUpperCase(), template, spec: spec as Record<string, unknown>, parameters });
    }
  }
  return operations;
}

/**
 * Finds the document's operation for a method and a concrete path, before
 * any body is parsed or validated. Where templates overlap
 * (`/api/iotnodes/claim` and `/api/iotnodes/{id}`), the one with more literal
 * segments wins, as it does in the routers.
 */
export function operationMatcher(openapi: OpenApiDocument): (method: string, path: string) => Operation | null {
  const byMethod = new Map<string, { pattern: RegExp; literals: number; operation: Operation }[]>();
  for (const operation of operationsOf(openapi)) {
    const { template } = operation;
    const pattern = new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '/?$');
    const literals = template.split('/').filter((s) => s && !s.startsWith('{')).length;
    const list = byMethod.get(operation.method) ?? [];
    list.push({ pattern, literals, operation });
    byMethod.set(operation.method, list);
  }
  for (const list of byMethod.values()) list.sort((a, b) => b.literals - a.literals);
  return (method, path) => byMethod.get(method.toUpperCase())?.find((o) => o.pattern.test(path))?.operation ?? null;
}

/**
 * Validators of named schemas of the document (`#/components/schemas/<name>`),
 * compiled once, for checks the request validator cannot make because the
 * schema depends on the request (a command's `data`, by its command).
 * A failing value is a `ValidationError` naming the first failing field under `prefix`.
 */
export function schemaChecks(openapi: OpenApiDocument): (name: string, value: unknown, prefix: string) => void {
  const ajv = new Ajv({ strict: false, allErrors: false, useDefaults: true, validateSchema: false });
  addFormats.default(ajv);
  ajv.addSchema({ $id: 'openapi', components: { schemas: structuredClone(openapi.components.schemas) } });
  const compiled = new Map<string, ValidateFunction>();
  return (name, value, prefix) => {
    let validate = compiled.get(name);
    if (!validate) {
      if (!openapi.components.schemas[name]) throw new Error(`api/openapi.yaml has no components.schemas.${name}`);
      validate = ajv.compile({ $ref: `openapi#/components/schemas/${name}` });
      compiled.set(name, validate);
    }
    if (!validate(value)) throw new ValidationError(`ERR - ${describe(validate.errors![0]!, prefix)}`);
  };
}
