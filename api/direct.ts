import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { operationsOf, type OpenApiDocument, type Parameter } from './openapi.js';
import { inputProblem, isInstant } from './input.js';

/**
 * An operation called at a machine's rate (a network server's webhook) that
 * comes in directly, instead of through the generic pipeline: its handler is
 * the one its router also mounts.
 */
export interface DirectRoute {
  method: string;
  /** The operation's path in the OpenAPI document, such as `/api/integrations/{integration}/{connectorId}`. */
  template: string;
  handler: (req: Request, res: Response, next: NextFunction) => unknown;
}

/** The body steps of the generic pipeline, shared so a body is read and refused in one way: `Content-Encoding`, then JSON. */
export interface BodySteps {
  encoding: RequestHandler;
  json: RequestHandler;
  /** The JSON step's cap, in bytes. */
  limit: number;
}

/** Content types the direct way reads as they come; any other goes the full way (where the validator names the problem). */
const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8']);

/**
 * The direct way in for one operation, mounted right after the request id
 * and the request timer. Every request walks the generic pipeline's router,
 * its per-request middlewares and the OpenAPI validator, whose cost a
 * webhook pays per message; this takes the one operation's requests off it,
 * for the same answers:
 *
 * - It takes only `method` on exactly the template's path, its parameters
 *   free of percent-escapes; every other request is passed on untouched.
 * - The operation's parameter and body schemas are compiled from the
 *   document, once: path parameters, the query (no parameter the document
 *   does not list, no empty value unless it allows one) and the body.
 * - The body goes through the pipeline's own encoding and JSON steps, so size,
 *   encoding and syntax errors are the same errors, answered by the one error
 *   handler; then `inputProblem`, the input check of every request.
 * - A request that fails any check of its own is passed on to the full
 *   pipeline (a body already read is not read again), whose validator and
 *   input check refuse it with the answer they always give: the direct way
 *   answers only requests it has found valid, so a refusal is never worded
 *   twice. Its checks are at least as strict as the validator's.
 *
 * What the generic pipeline does before the body (the `Deprecation` header,
 * authentication, the role check) must have nothing to do for the operation:
 * it is public (`security: []`, its handler authenticates the caller), not
 * deprecated and has no `x-resource`. Any of these, a header or cookie
 * parameter, a body other than JSON, a `readOnly` property (which the
 * validator refuses in requests) or another operation on paths this one
 * takes fails at start.
 */
export function directRoute(openapi: OpenApiDocument, route: DirectRoute, body: BodySteps): RequestHandler {
  const method = route.method.toUpperCase();
  const operations = operationsOf(openapi);
  const operation = operations.find((o) => o.method === method && o.template === route.template);
  const refuse = (why: string): never => {
    throw new Error(`${method} ${route.template} cannot come in directly: ${why}`);
  };
  if (!operation) return refuse('the OpenAPI document has no such operation');
  const { spec, parameters } = operation;
  if (!Array.isArray(spec.security) || spec.security.length !== 0) refuse('it is not public (security: [])');
  if (spec.deprecated === true) refuse('it is deprecated');
  if (spec['x-resource'] !== undefined) refuse('it has an x-resource');
  if (parameters.some((p) => p.in !== 'path' && p.in !== 'query')) refuse('it has header or cookie parameters');
  const requestBody = spec.requestBody as { required?: boolean; content?: Record<string, { schema?: unknown }> } | undefined;
  const media = Object.keys(requestBody?.content ?? {});
  if (!requestBody || media.length !== 1 || media[0] !== 'application/json') refuse('its body is not JSON alone');
  const overlapping = operations.find((o) => o !== operation && o.method === method && overlaps(o.template, route.template));
  if (overlapping) refuse(`${overlapping.template} takes some of its paths`);

  const schemas = { components: openapi.components };
  const bodySchema = requestBody!.content!['application/json']!.schema ?? {};
  if (mentions(bodySchema, 'readOnly', openapi) || parameters.some((p) => mentions(p.schema, 'readOnly', openapi))) refuse('its request has readOnly properties');

  const names = [...route.template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const pattern = new RegExp('^' + route.template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '([^/%]+)') + '$');
  const inPath = parameters.filter((p) => p.in === 'path');
  if (inPath.length !== names.length || !names.every((n) => inPath.some((p) => p.name === n))) refuse('its path parameters differ from its template');
  const inQuery = parameters.filter((p) => p.in === 'query');
  const emptyAllowed = new Set(inQuery.filter((p) => p.allowEmptyValue === true).map((p) => p.name));

  // Parameters are coerced from text as the validator coerces them; the body is taken as sent.
  const params = compile(true, { ...schemas, ...objectOf(inPath, false) });
  const query = compile(true, { ...schemas, ...objectOf(inQuery, true) });
  const payload = compile(false, { ...schemas, allOf: [bodySchema] });

  const queryFits = (q: Record<string, unknown>): boolean => {
    for (const key in q) {
      const value = q[key];
      if (typeof value !== 'string' || (value === '' && !emptyAllowed.has(key))) return false;
    }
    // A copy: coercion writes into what it checks, and the route reads the query as sent.
    return query({ ...q });
  };

  return (req, res, next) => {
    if (req.method !== method) return next();
    const match = pattern.exec(req.path);
    if (!match) return next();
    const values: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) values[names[i]!] = match[i + 1]!;
    if (!params({ ...values }) || !JSON_TYPES.has(req.headers['content-type'] ?? '')) return next();
    const q = req.query as Record<string, unknown>;
    if (!queryFits(q)) return next();
    const checked = (error?: unknown) => {
      if (error) return next(error);
      // The checks and the route read the query that was checked, not a second parse of it; passed on, the request has its own again.
      Object.defineProperty(req, 'query', { value: q, writable: true, configurable: true, enumerable: true });
      if ((requestBody!.required && req.body === undefined) || !payload(req.body) || inputProblem(req, () => parameters)) {
        delete (req as { query?: unknown }).query;
        return next();
      }
      req.params = values;
      try {
        Promise.resolve(route.handler(req, res, next)).catch(next);
      } catch (error) {
        next(error);
      }
    };
    const length = req.headers['content-length'];
    if (length !== undefined && req.headers['content-encoding'] === undefined && req.headers['transfer-encoding'] === undefined && DIGITS.test(length) && Number(length) <= body.limit) {
      readJson(req, checked);
    } else {
      body.encoding(req, res, (error?: unknown) => (error ? next(error) : body.json(req, res, checked)));
    }
  };
}

const DIGITS = /^\d{1,10}$/;
const FIRST_NON_WHITESPACE = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d]|$)/;

/** An error the pipeline's JSON step would raise, for the one error handler: the same `type`, so the same answer. */
const bodyError = (status: number, type: string, message: string) => Object.assign(new Error(message), { status, type });

/**
 * Reads a JSON body of the one shape a network server sends (identity
 * encoding, a `Content-Length` within the cap; the JSON step reads any
 * other) as the pipeline's JSON step (body-parser, strict) reads it: UTF-8
 * with a leading byte-order mark dropped, an empty body as `{}`, and only an
 * object or an array at the top, anything else refused as JSON that does not
 * parse. Node's HTTP parser ends the body at its `Content-Length`.
 */
function readJson(req: Request, done: (error?: unknown) => void): void {
  const chunks: Buffer[] = [];
  let settled = false;
  const settle = (error?: unknown) => {
    if (settled) return;
    settled = true;
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onAbort);
    req.off('aborted', onAbort);
    done(error);
  };
  const onData = (chunk: Buffer) => chunks.push(chunk);
  const onAbort = () => settle(bodyError(400, 'request.aborted', 'request aborted'));
  const onEnd = () => {
    let text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.length === 0) {
      req.body = {};
      return settle();
    }
    const first = text[0] === '{' || text[0] === '[' ? text[0] : FIRST_NON_WHITESPACE.exec(text)![1];
    if (first !== '{' && first !== '[') return settle(bodyError(400, 'entity.parse.failed', 'JSON must be an object or an array'));
    try {
      req.body = JSON.parse(text);
    } catch (error) {
      return settle(bodyError(400, 'entity.parse.failed', (error as Error).message));
    }
    settle();
  };
  req.on('data', onData);
  req.on('end', onEnd);
  req.on('error', onAbort);
  req.on('aborted', onAbort);
}

/** An Ajv for the document's schemas: its `date-time` is an instant (`isInstant`), as in the validator. */
function compile(coerceTypes: boolean, schema: object): ValidateFunction {
  const ajv = new Ajv({ strict: false, allErrors: false, coerceTypes, validateSchema: false });
  addFormats.default(ajv);
  ajv.addFormat('date-time', { type: 'string', validate: isInstant });
  return ajv.compile(schema);
}

/** The parameters as one object schema; the query's takes no other parameter. */
function objectOf(parameters: Parameter[], closed: boolean): object {
  return {
    type: 'object',
    properties: Object.fromEntries(parameters.map((p) => [p.name, p.schema ?? {}])),
    required: parameters.filter((p) => p.in === 'path' || p.required).map((p) => p.name),
    ...(closed ? { additionalProperties: false } : {}),
  };
}

/** Whether two templates can match one path: as many segments, and no position where both are different literals. */
function overlaps(a: string, b: string): boolean {
  const x = a.split('/');
  const y = b.split('/');
  return x.length === y.length && x.every((s, i) => s === y[i] || s.startsWith('{') || y[i]!.startsWith('{'));
}

/** Whether `keyword` appears in `schema` or a schema of the document it refers to. */
function mentions(schema: unknown, keyword: string, openapi: OpenApiDocument, seen = new Set<unknown>()): boolean {
  if (schema === null || typeof schema !== 'object' || seen.has(schema)) return false;
  seen.add(schema);
  const ref = (schema as { $ref?: unknown }).$ref;
  if (typeof ref === 'string' && ref.startsWith('#/components/schemas/')) {
    if (mentions(openapi.components.schemas[ref.slice('#/components/schemas/'.length)], keyword, openapi, seen)) return true;
  }
  return Object.entries(schema).some(([k, v]) => k === keyword || mentions(v, keyword, openapi, seen));
}
