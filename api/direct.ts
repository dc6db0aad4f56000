import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { operationsOf, type OpenApiDocument, type Parameter } from './openapi.js';
import { inputProblem, isInstant } from './input.js';
import type { RequestTimer } from './metrics.js';

/** A request as an operation's handler reads it, whichever way it came in. */
export interface DirectCall {
  /** Path parameters by name, decoded. */
  params: Record<string, string>;
  query: Record<string, unknown>;
  body: unknown;
  headers: IncomingHttpHeaders;
  remoteAddress: string | undefined;
  /** The request id: also the correlation id of every event the call writes. */
  id: string;
  log: Logger;
}

/**
 * An operation called at a machine's rate (a network server's webhook) that
 * is taken in directly, ahead of the generic pipeline; `handle` decides what
 * it does, and its router calls the same function.
 */
export interface DirectRoute {
  method: string;
  /** The operation's path in the OpenAPI document, such as `/api/integrations/{integration}/{connectorId}`. */
  template: string;
  /** The JSON body of the operation's 200 answer, or an error for the one error handler. */
  handle: (call: DirectCall) => Promise<unknown>;
}

/** What the direct way shares with the HTTP pipeline (`api/app.ts`), so a request is stamped, timed, refused and answered in one way. */
export interface Pipeline {
  /** The full pipeline: for a request the direct way does not take, or hands on with its body read, to be refused there. */
  full: (req: IncomingMessage, res: ServerResponse) => void;
  /** The one error handler, for a request the direct way took (already stamped and timed). */
  fail: (req: IncomingMessage, res: ServerResponse, error: unknown) => void;
  /** Gives a request its id and logger (`X-Request-Id`), once. */
  stamp: (req: IncomingMessage, res: ServerResponse) => { id: string; log: Logger };
  /** The request timer, when metrics are on. */
  time: RequestTimer | null;
  /** The pipeline's query parser. */
  parseQuery: (text: string | null) => Record<string, unknown>;
  /** The pipeline's ETag of a JSON answer, so an answer given here carries the same one. */
  etag: ((body: Buffer, encoding: 'utf8') => string | undefined) | null;
  /** The cap of a JSON body, in bytes. */
  limit: number;
}

/** Content types the direct way takes as they come; the validator has the last word on any other. */
const JSON_TYPES = new Set(['application/json', 'application/json; charset=utf-8']);

/**
 * The direct way in for one operation: a request listener that takes the
 * operation's valid requests and answers them, and returns false for every
 * other request, which the HTTP server gives to the full pipeline. Express's
 * per-request work (its router walking every layer, its request and response
 * objects, the per-request middlewares, the OpenAPI validator scanning every
 * path) costs a webhook more than its own work; this keeps what it guarantees:
 *
 * - It takes only `method` on exactly the template's path, as printable
 *   ASCII without percent-escapes, with the document's JSON media type, a
 *   `Content-Length` within the cap and no `Content-Encoding`.
 * - The operation's parameter and body schemas are compiled from the
 *   document once: path parameters, the query (parsed by the pipeline's own
 *   parser; no parameter the document does not list, no empty value unless
 *   it allows one) and the body; then `inputProblem`, the input check of every
 *   request.
 * - A request it takes gets its id and logger and is timed as any request
 *   is; its body is read as the pipeline's JSON step reads it. A body that
 *   does not parse goes to the one error handler as that step's error would;
 *   a request that fails any other check is handed on, its body read, to the
 *   full pipeline, whose validator and input check refuse it with the answer
 *   they always give: the direct way answers only requests it finds valid, so
 *   a refusal is worded in one place. Its checks are at least as strict as
 *   the validator's.
 * - The handler's answer is written as express writes JSON (same headers,
 *   the pipeline's ETag); its errors go to the one error handler.
 *
 * What the pipeline does before reading a body (the `Deprecation` header,
 * authentication, the role check) must have nothing to do for the operation:
 * it is public (`security: []`: its handler authenticates the caller), not
 * deprecated, and has no `x-resource`. Any of these, a header or cookie
 * parameter, a body other than JSON, a `readOnly` property (which the
 * validator refuses in requests) or another operation on paths this one
 * takes fails at start.
 */
export function directRoute(openapi: OpenApiDocument, route: DirectRoute, pipeline: Pipeline): (req: IncomingMessage, res: ServerResponse) => boolean {
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
  const requestBody = spec.requestBody as { content?: Record<string, { schema?: unknown }> } | undefined;
  const media = Object.keys(requestBody?.content ?? {});
  if (media.length !== 1 || media[0] !== 'application/json') refuse('its body is not JSON alone');
  const overlapping = operations.find((o) => o !== operation && o.method === method && overlaps(o.template, route.template));
  if (overlapping) refuse(`${overlapping.template} takes some of its paths`);
  const bodySchema = requestBody!.content!['application/json']!.schema ?? {};
  if (mentions(bodySchema, 'readOnly', openapi) || parameters.some((p) => mentions(p.schema, 'readOnly', openapi))) refuse('its request has readOnly properties');

  const names = [...route.template.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const inPath = parameters.filter((p) => p.in === 'path');
  if (inPath.length !== names.length || !names.every((n) => inPath.some((p) => p.name === n))) refuse('its path parameters differ from its template');
  const inQuery = parameters.filter((p) => p.in === 'query');
  const declared = new Set(inQuery.map((p) => p.name));
  const emptyAllowed = new Set(inQuery.filter((p) => p.allowEmptyValue === true).map((p) => p.name));
  // Printable ASCII only: a segment without `/`, `?`, `#` or `%` (what the router would decode), a query without `#`.
  const pattern = new RegExp(
    '^' + route.template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '([\\x21\\x22\\x24\\x26-\\x2e\\x30-\\x3e\\x40-\\x7e]+)') + '(?:\\?([\\x21\\x22\\x24-\\x7e]*))?$',
  );

  // Parameters are coerced from text as the validator coerces them (each check gets a copy); the body is taken as sent.
  const schemas = { components: openapi.components };
  const checkParams = compile(true, { ...schemas, ...objectOf(inPath, false) });
  const checkQuery = compile(true, { ...schemas, ...objectOf(inQuery, true) });
  const checkBody = compile(false, { ...schemas, allOf: [bodySchema] });
  const queryFits = (query: Record<string, unknown>): boolean => {
    for (const key in query) {
      const value = query[key];
      if (typeof value !== 'string' || (value === '' && !emptyAllowed.has(key))) return false;
    }
    return checkQuery({ ...query });
  };

  const answer = (res: ServerResponse, value: unknown) => {
    // As express's `res.json` writes it with the pipeline's settings: the same headers, in the same order.
    const body = Buffer.from(JSON.stringify(value), 'utf8');
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', body.length);
    const etag = pipeline.etag?.(body, 'utf8');
    if (etag) res.setHeader('ETag', etag);
    res.end(body);
  };

  /** The request's parameters and query when it is one to take, else null. */
  const takes = (req: IncomingMessage): { params: Record<string, string>; query: Record<string, unknown>; path: string } | null => {
    if (req.method !== method) return null;
    const match = pattern.exec(req.url ?? '');
    if (!match) return null;
    const params: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) params[names[i]!] = match[i + 1]!;
    if (!checkParams({ ...params }) || !JSON_TYPES.has(req.headers['content-type'] ?? '')) return null;
    const length = req.headers['content-length'];
    if (length === undefined || !DIGITS.test(length) || Number(length) > pipeline.limit) return null;
    if (req.headers['content-encoding'] !== undefined || req.headers['transfer-encoding'] !== undefined) return null;
    const search = match[names.length + 1];
    // One declared `name=value` of plain characters reads the same through any parser; qs costs a webhook more than its hash.
    const plain = search === undefined ? null : PLAIN_PAIR.exec(search);
    const query = plain && declared.has(plain[1]!) ? { [plain[1]!]: plain[2]! } : pipeline.parseQuery(search ?? null);
    if (!queryFits(query)) return null;
    return { params, query, path: search === undefined ? req.url! : req.url!.slice(0, -search.length - 1) };
  };

  return (req, res) => {
    let taken: ReturnType<typeof takes>;
    try {
      taken = takes(req);
    } catch {
      // Nothing the checks cannot read is taken: the full pipeline reads it its own way.
      taken = null;
    }
    if (!taken) return false;
    const { params, query, path } = taken;
    const { id, log } = pipeline.stamp(req, res);
    pipeline.time?.(req, res, route.template);
    readJson(req, (error, body) => {
      if (error) return pipeline.fail(req, res, error);
      try {
        if (!checkBody(body) || inputProblem({ path, query, body }, () => parameters)) return pipeline.full(req, res);
        route
          .handle({ params, query, body, headers: req.headers, remoteAddress: req.socket.remoteAddress, id, log })
          .then((value) => answer(res, value))
          .catch((error: unknown) => pipeline.fail(req, res, error));
      } catch (error) {
        pipeline.fail(req, res, error);
      }
    });
    return true;
  };
}

const DIGITS = /^\d{1,10}$/;
const PLAIN_PAIR = /^([A-Za-z0-9_-]+)=([A-Za-z0-9_.~-]*)$/;
const FIRST_NON_WHITESPACE = /^[\x20\x09\x0a\x0d]*([^\x20\x09\x0a\x0d]|$)/;

/** An error the pipeline's JSON step (body-parser) raises, for the one error handler: the same `type`, so the same answer. */
const bodyError = (status: number, type: string, message: string) => Object.assign(new Error(message), { status, type });

/**
 * Reads a JSON body as the pipeline's JSON step (body-parser, strict) reads
 * it: UTF-8 with a leading byte-order mark dropped, an empty body as `{}`,
 * and only an object or an array at the top, anything else refused as JSON
 * that does not parse. Node's HTTP parser ends the body at its
 * `Content-Length`. The body is also left on the request (`req.body`, the
 * stream read to its end), where the full pipeline's JSON step finds it.
 */
function readJson(req: IncomingMessage & { body?: unknown }, done: (error: unknown, body?: unknown) => void): void {
  const chunks: Buffer[] = [];
  let settled = false;
  const settle = (error: unknown, body?: unknown) => {
    if (settled) return;
    settled = true;
    req.off('data', onData);
    req.off('end', onEnd);
    req.off('error', onAbort);
    req.off('aborted', onAbort);
    if (!error) req.body = body;
    done(error, body);
  };
  const onData = (chunk: Buffer) => chunks.push(chunk);
  const onAbort = () => settle(bodyError(400, 'request.aborted', 'request aborted'));
  const onEnd = () => {
    let text = (chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)).toString('utf8');
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.length === 0) return settle(null, {});
    const first = text[0] === '{' || text[0] === '[' ? text[0] : FIRST_NON_WHITESPACE.exec(text)![1];
    if (first !== '{' && first !== '[') return settle(bodyError(400, 'entity.parse.failed', 'JSON must be an object or an array'));
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch (error) {
      return settle(bodyError(400, 'entity.parse.failed', (error as Error).message));
    }
    settle(null, body);
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
