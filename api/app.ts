import { randomUUID } from 'node:crypto';
import express, { type Express, type RequestHandler } from 'express';
import * as OpenApiValidator from 'express-openapi-validator';
import swaggerUi from 'swagger-ui-express';
import type { Deps } from './deps.js';
import { errorHandler } from './errors.js';
import { authenticate, authorizeMethod } from './auth/middleware.js';
import { operationMatcher, type OpenApiDocument, type Operation } from './openapi.js';
import { NotFoundError } from '../domain/shared/errors.js';
import './http.js';
import { memoizeValidatorRouteMatchers } from './routeMatchers.js';
import { checkInput, contentEncoding, isInstant } from './input.js';
import { timeRequests, type Metrics } from './metrics.js';
import { directRoute, type DirectRoute } from './direct.js';

/** Body cap for JSON requests, in bytes (1 MiB); larger bodies get 413. */
export const JSON_LIMIT = 1024 * 1024;

export interface Routes {
  /** Parsers of bodies other than JSON (multipart forms), run before validation so the document checks what they parsed. */
  parsers?: RequestHandler[];
  /** Mounted after validation and authentication, in order. */
  routers: express.Router[];
  /** Operations called at a machine's rate (webhooks), taken in right after the request id, ahead of the generic pipeline (`api/direct.ts`). */
  direct?: DirectRoute[];
  /** The control panel, served at `/` before authentication (its pages are public; its data comes from the API). */
  panel?: express.Router;
  /** True when the platform is ready to serve (database, event store and projections up). */
  health: () => Promise<{ ready: boolean; detail: Record<string, unknown> }>;
  /** `GET /metrics`, answered before authentication (it has a token of its own), and the request timer when metrics are on. */
  metrics?: { route: RequestHandler; requests: Metrics['http'] | null };
}

/**
 * The HTTP pipeline: request id and logger, the direct way in of the
 * webhooks, body parsing, the OpenAPI document (validation, docs),
 * authentication and the role check, the capability routers, then the one
 * error handler.
 */
export function createApp(deps: Deps, openapi: OpenApiDocument, routes: Routes): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'extended');
  app.set('trust proxy', false);

  app.use((req, res, next) => {
    req.id = randomUUID();
    req.log = deps.log.child({ reqId: req.id });
    res.setHeader('X-Request-Id', req.id);
    next();
  });
  const operationOf = operationMatcher(openapi);
  if (routes.metrics?.requests) app.use(timeRequests(routes.metrics.requests, operationOf));
  const encoding = contentEncoding();
  const json = express.json({ limit: JSON_LIMIT });
  for (const route of routes.direct ?? []) app.use(directRoute(openapi, route, { encoding, json, limit: JSON_LIMIT }));
  if (routes.metrics) app.get('/metrics', routes.metrics.route);
  app.get('/api/openapi.json', (_req, res) => {
    res.json(openapi);
  });
  app.use('/api/docs', swaggerUi.serve, swaggerUi.setup(openapi as object));
  app.get('/api/health', async (_req, res) => {
    const { ready, detail } = await routes.health();
    res.status(ready ? 200 : 503).json({ status: ready ? 'ok' : 'starting', ...detail });
  });

  if (routes.panel) app.use(routes.panel);

  // Authentication and the role check come before body parsing and validation: an anonymous caller gets 401 and a
  // caller whose role does not allow the method gets 403 `Forbidden`, never a verdict on a body they may not send.
  const auth = authenticate(deps);
  app.use(deprecation(operationOf));
  app.use((req, res, next) => (isPublic(operationOf(req.method, req.path)) ? next() : auth(req, res, next)));
  app.use(authorizeMethod(deps, operationOf));
  app.use(encoding);
  app.use(json);

  for (const parser of routes.parsers ?? []) app.use(parser);
  // Text and shape limits (NUL, lone surrogates, depth, key length) before the validator or a route walks the input.
  app.use(checkInput(operationOf));
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
  return app;
}

/** An operation the document marks `security: []`. */
const isPublic = (operation: Operation | null): boolean => Array.isArray(operation?.spec.security) && operation.spec.security.length === 0;

/**
 * Operations the document marks `deprecated` answer with RFC 9745's
 * `Deprecation` header (the date in `x-deprecated-since`, as `@<epoch
 * seconds>`) and a `Link` to the reference, whatever the outcome, so a client
 * learns it from any answer.
 */
function deprecation(operationOf: (method: string, path: string) => Operation | null): RequestHandler {
  return (req, res, next) => {
    const spec = operationOf(req.method, req.path)?.spec;
    if (spec?.deprecated === true) {
      const since = Date.parse(String(spec['x-deprecated-since']));
      res.setHeader('Deprecation', Number.isFinite(since) ? `@${Math.floor(since / 1000)}` : '@0');
      res.setHeader('Link', '</api/docs/>; rel="deprecation"; type="text/html"');
    }
    next();
  };
}
