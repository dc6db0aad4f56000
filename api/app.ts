import { randomUUID } from 'node:crypto';
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import express, { type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import swaggerUi from 'swagger-ui-express';
import type { Deps } from './deps.js';
import { errorHandler } from './errors.js';
import { authenticate, authorizeMethod } from './auth/middleware.js';
import { operationMatcher, type OpenApiDocument, type Operation } from './openapi.js';
import { MethodNotAllowedError, NotFoundError } from '../domain/shared/errors.js';
import './http.js';
import { memoizeValidatorRouteMatchers } from './routeMatchers.js';
import { checkInput, contentEncoding, isInstant } from './input.js';
import { requestTimer, timeRequests, type Metrics } from './metrics.js';
import { directRoute, type DirectRoute, type Pipeline } from './direct.js';
import { userTurns } from './turns.js';

/** Body cap for JSON requests, in bytes (1 MiB); larger bodies get 413. */
export const JSON_LIMIT = 1024 * 1024;

export interface Routes {
  /** Parsers of bodies other than JSON (multipart forms), run before validation so the document checks what they parsed. */
  parsers?: RequestHandler[];
  /** Mounted after validation and authentication, in order. */
  routers: express.Router[];
  /** Operations called at a machine's rate (webhooks), taken in ahead of the generic pipeline when valid (`api/direct.ts`). */
  direct?: DirectRoute[];
  /** The control panel, served at `/` before authentication (its pages are public; its data comes from the API). */
  panel?: express.Router;
  /** True when the platform is ready to serve (database, event store and projections up). */
  /** `ready`: 200, `ok` (or `degraded` while something it can serve without is away); otherwise 503 `starting` (`stopping` during a stop). */
  health: () => Promise<{ ready: boolean; degraded?: boolean; stopping?: boolean; detail: Record<string, unknown> }>;
  /** `GET /metrics`, answered before authentication (it has a token of its own), and the request timer when metrics are on. */
  metrics?: { route: RequestHandler; requests: Metrics['http'] | null };
}

/**
 * The HTTP pipeline: request id and logger, body parsing, the OpenAPI
 * document (validation, docs), authentication and the role check, the
 * capability routers, then the one error handler. The server's listener
 * offers each request first to the direct routes (`api/direct.ts`), which
 * take the valid calls of their operation and leave every other request to
 * the pipeline.
 */
export function createApp(deps: Deps, openapi: OpenApiDocument, routes: Routes): RequestListener {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'extended');
  app.set('trust proxy', false);

  // Once per request: one the direct way took and handed on keeps its id, logger and timer.
  const stamp = (req: IncomingMessage & { id?: string; log?: Logger }, res: ServerResponse): { id: string; log: Logger } => {
    if (!req.id) {
      req.id = randomUUID();
      req.log = deps.log.child({ reqId: req.id });
      res.setHeader('X-Request-Id', req.id);
    }
    return { id: req.id, log: req.log! };
  };
  app.use((req, res, next) => {
    stamp(req, res);
    next();
  });
  const operationOf = operationMatcher(openapi);
  const time = routes.metrics?.requests ? requestTimer(routes.metrics.requests) : null;
  if (time) app.use(timeRequests(time, operationOf));
  // An error the direct way met on a request it took goes straight to the error handler.
  const carried = new WeakMap<IncomingMessage, unknown>();
  app.use((req, _res, next) => next(carried.get(req)));
  if (routes.metrics) app.get('/metrics', routes.metrics.route);
  app.get('/api/openapi.json', (_req, res) => {
    res.json(openapi);
  });
  app.use('/api/docs', docsFiles, swaggerUi.serve, swaggerUi.setup(undefined, { swaggerUrl: '/api/openapi.json', customSiteTitle: 'Device platform API' }));
  app.get('/api/health', async (_req, res) => {
    const { ready, degraded, stopping, detail } = await routes.health();
    res.status(ready ? 200 : 503).json({ status: stopping ? 'stopping' : ready ? (degraded ? 'degraded' : 'ok') : 'starting', ...detail });
  });

  if (routes.panel) app.use(routes.panel);

  // Authentication and the role check come before body parsing and validation: an anonymous caller gets 401 and a
  // caller whose role does not allow the method gets 403 `Forbidden`, never a verdict on a body they may not send.
  const auth = authenticate(deps);
  app.use(knownOperation(operationOf));
  app.use(deprecation);
  app.use((req, res, next) => (isPublic(req.operation!) ? next() : auth(req, res, next)));
  app.use(authorizeMethod(deps));
  app.use(userTurns(deps.config.httpUserConcurrency, deps.config.httpUserQueue, deps.config.httpStatementTimeoutMs));
  app.use(contentEncoding());
  app.use(express.json({ limit: JSON_LIMIT }));

  for (const parser of routes.parsers ?? []) app.use(parser);
  // Text and shape limits (NUL, lone surrogates, depth, key length) before the validator or a route walks the input.
  app.use(checkInput);
  memoizeValidatorRouteMatchers();
  app.use(
    OpenApiValidator.middleware({
      apiSpec: structuredClone(openapi) as never,
      // Query, path and header values are always coerced; `false` keeps a JSON body's types strict (`42` is not a string).
      validateRequests: { allowUnknownQueryParameters: false, coerceTypes: false },
      validateResponses: false,
      validateSecurity: false,
      ignoreUndocumented: false,
      fileUploader: false,
      // Every `date-time` of the document, in a body or a query, names a real instant.
      formats: { 'date-time': { type: 'string', validate: isInstant } },
    }),
  );

  for (const router of routes.routers) app.use(router);

  app.use((_req, _res, next) => next(new NotFoundError()));
  app.use(errorHandler);

  const pipeline: Pipeline = {
    full: (req, res) => app(req as express.Request, res as express.Response),
    fail: (req, res, error) => {
      carried.set(req, error);
      app(req as express.Request, res as express.Response);
    },
    stamp,
    time,
    parseQuery: app.get('query parser fn'),
    etag: app.get('etag fn') ?? null,
    limit: JSON_LIMIT,
  };
  const direct = (routes.direct ?? []).map((route) => directRoute(openapi, route, pipeline));
  if (!direct.length) return app;
  return (req, res) => {
    for (const take of direct) if (take(req, res)) return;
    app(req as express.Request, res as express.Response);
  };
}

/**
 * The reference page loads the document from `/api/openapi.json` (inlining it
 * into the page's script would let a `$` in a description break it) and
 * nothing but the files the page uses: the rest of the Swagger UI package
 * (its stock Petstore page, source maps, README) is not the platform's.
 */
const DOCS_FILES = new Set(['/', '/swagger-ui-init.js', '/swagger-ui.css', '/swagger-ui-bundle.js', '/swagger-ui-standalone-preset.js', '/favicon-32x32.png', '/favicon-16x16.png']);
const docsFiles: RequestHandler = (req, res, next) => {
  if (!DOCS_FILES.has(req.path)) return next(new NotFoundError());
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('Content-Security-Policy', "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'");
  next();
};

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/**
 * Every request past this point is an operation of the document, its path
 * matched to the letter. The role check finds the resource type through the
 * same match, while Express and the request validator match paths without
 * regard to case: `/API/Dashboards` must not reach a router with no role
 * checked. A known path with another method answers 405 with `Allow`.
 */
function knownOperation(operationOf: (method: string, path: string) => Operation | null): RequestHandler {
  return (req, _res, next) => {
    const operation = operationOf(req.method, req.path);
    if (operation) {
      req.operation = operation;
      return next();
    }
    const allowed = METHODS.filter((m) => operationOf(m, req.path));
    next(allowed.length ? new MethodNotAllowedError(allowed) : new NotFoundError());
  };
}

/** An operation the document marks `security: []`. */
const isPublic = (operation: Operation): boolean => Array.isArray(operation?.spec.security) && operation.spec.security.length === 0;

/**
 * Operations the document marks `deprecated` answer with RFC 9745's
 * `Deprecation` header (the date in `x-deprecated-since`, as `@<epoch
 * seconds>`) and a `Link` to the reference, whatever the outcome, so a client
 * learns it from any answer.
 */
const deprecation: RequestHandler = (req, res, next) => {
  const spec = req.operation?.spec;
  if (spec?.deprecated === true) {
    const since = Date.parse(String(spec['x-deprecated-since']));
    res.setHeader('Deprecation', Number.isFinite(since) ? `@${Math.floor(since / 1000)}` : '@0');
    res.setHeader('Link', '</api/docs/>; rel="deprecation"; type="text/html"');
  }
  next();
};
