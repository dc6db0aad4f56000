import { randomUUID } from 'node:crypto';
import type { ErrorRequestHandler } from 'express';
import { NoResultError } from 'kysely';
import {
  ConcurrencyError,
  ConflictError,
  ForbiddenError,
  MethodNotAllowedError,
  NotFoundError,
  BadGatewayError,
  BadRequestError,
  PayloadTooLargeError,
  PlatformError,
  PreconditionFailedError,
  TooManyRequestsError,
  UnauthorizedError,
  UnavailableError,
  UnprocessableError,
  UnsupportedMediaTypeError,
  ValidationError,
} from '../domain/shared/errors.js';

/**
 * The one place errors become HTTP. Error bodies are `text/plain`: the
 * message itself, such as `Forbidden` or `ERR - name must NOT have more than
 * 50 characters`, exactly as the contract shows them. A validation that found
 * several problems at once answers JSON instead: `{message, errors: [{field,
 * problem}]}`, the message being the first problem in the contract's form.
 */
export function statusOf(error: PlatformError): number {
  if (error instanceof ValidationError || error instanceof UnprocessableError) return 422;
  if (error instanceof NotFoundError) return 404;
  if (error instanceof UnauthorizedError) return 401;
  if (error instanceof ForbiddenError) return 403;
  if (error instanceof PreconditionFailedError) return 412;
  if (error instanceof ConcurrencyError || error instanceof ConflictError) return 409;
  if (error instanceof PayloadTooLargeError) return 413;
  if (error instanceof UnavailableError) return 503;
  if (error instanceof UnsupportedMediaTypeError) return 415;
  if (error instanceof TooManyRequestsError) return 429;
  if (error instanceof MethodNotAllowedError) return 405;
  if (error instanceof BadRequestError) return 400;
  if (error instanceof BadGatewayError) return 502;
  return 400;
}

/**
 * Errors of the HTTP layer itself (body-parser, the router), which carry a
 * 4xx `status` and a `type`: an encoding the body parser does not speak, a
 * body that does not decode with its `Content-Encoding`, a path that does not
 * percent-decode. Never a 500: the request is what is wrong.
 */
function fromHttpLayer(err: { status?: unknown; type?: unknown; message?: unknown; encoding?: unknown }): { status: number; message: string } | null {
  const status = typeof err.status === 'number' ? err.status : null;
  if (status === null || status < 400 || status >= 500) return null;
  if (err.type === 'encoding.unsupported') return { status: 415, message: `ERR - Content-Encoding ${String(err.encoding ?? '')} is not supported; send the body as identity, gzip, deflate or br` };
  if (err.type === 'charset.unsupported') return { status: 415, message: `ERR - ${String(err.message)}; send JSON as UTF-8` };
  if (status === 400 && (err.type === undefined || err.type === 'stream.encoding.set')) return { status: 400, message: 'ERR - body could not be read: it does not decode with its Content-Encoding, or it ended early' };
  return { status, message: `ERR - ${String(err.message ?? 'bad request')}` };
}

interface ValidatorError {
  status: number;
  errors?: { path?: string; message?: string }[];
  message?: string;
}

/** `/body/widgets/0/x` → `widgets.0.x`; `/query/limit` → `limit`. */
const fieldOf = (path = ''): string =>
  path
    .replace(/^\/?(body|query|params|path|headers)(\/|$)/, '')
    .split('/')
    .filter(Boolean)
    .join('.') || 'body';

/** ajv's wording, as a sentence about the field the path already names. */
const why = (message = 'is invalid'): string =>
  message.startsWith('must have required property') ? 'is required' : message === 'must NOT have additional properties' ? 'is not allowed' : message;

/** express-openapi-validator's errors (it has no request-side hook), mapped to the contract's `ERR - <field> <why>`. */
function fromValidator(err: ValidatorError): { status: number; message: string } | null {
  if (typeof err.status !== 'number' || !Array.isArray(err.errors)) return null;
  const first = err.errors[0] ?? {};
  switch (err.status) {
    case 400: {
      // A `oneOf` chosen by a discriminator names the property in the message and the request's path as its path.
      const named = /^'([^']+)' (.+?)\.?$/.exec(first.message ?? '');
      if (named) return { status: 422, message: `ERR - ${named[1]} ${why(named[2])}` };
      return { status: 422, message: `ERR - ${fieldOf(first.path)} ${why(first.message)}` };
    }
    case 404:
      return { status: 404, message: 'Not Found' };
    case 405:
      return { status: 405, message: 'Method Not Allowed' };
    case 413:
      return { status: 413, message: 'ERR - body is too large' };
    case 415:
      return { status: 415, message: `ERR - ${first.message ?? 'unsupported media type'}` };
    default:
      return { status: err.status, message: first.message ?? err.message ?? 'Bad Request' };
  }
}

/** What the database under a request tells its client, when it stopped a statement or cannot be reached; null for any other error. */
export function fromDatabase(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  // 57014: stopped at the HTTP connections' statement timeout (`HTTP_STATEMENT_TIMEOUT_MS`), or cancelled by an operator.
  if (code === '57014') return 'Service Unavailable: the request\'s query ran longer than the platform allows and was stopped; narrow it (a shorter time range, fewer resources) or try again later';
  const unreachable =
    (typeof code === 'string' && (/^08...$/.test(code) || ['57P01', '57P02', '57P03', '53300', 'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT'].includes(code))) ||
    (err instanceof Error && (err.message === 'timeout exceeded when trying to connect' || err.message.startsWith('Connection terminated')));
  return unreachable ? 'Service Unavailable: the database cannot be reached or has no connection free; try again shortly' : null;
}

export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  let status: number;
  let message: string;
  const body = err as { type?: string; status?: number; limit?: number };
  if (err instanceof PlatformError) {
    status = statusOf(err);
    message = err.message;
    if (err instanceof TooManyRequestsError) res.setHeader('Retry-After', String(err.retryAfterSeconds));
    if (err instanceof MethodNotAllowedError) res.setHeader('Allow', err.allowed.join(', '));
    if (err instanceof ConcurrencyError) message = 'The resource was changed by another request; read it again and retry';
  } else if (body?.type === 'entity.parse.failed') {
    // A body that cannot be parsed fails validation like any other malformed body.
    status = 422;
    message = 'ERR - body is not valid JSON';
  } else if (err instanceof NoResultError) {
    // A row that vanished between the object check and the read (deleted meanwhile, or an id of another kind of resource).
    status = 404;
    message = 'Not Found';
  } else if (body?.type === 'entity.too.large') {
    status = 413;
    message = `ERR - body is larger than ${body.limit} bytes`;
  } else {
    const mapped = fromValidator(err as ValidatorError);
    // What the document adds to every 422 of this operation's request validation (`x-refusal-note`).
    const note = req.operation?.spec['x-refusal-note'];
    if (mapped?.status === 422 && typeof note === 'string') mapped.message += `; ${note}`;
    const http = mapped ? null : fromHttpLayer(err as Parameters<typeof fromHttpLayer>[0]);
    const database = mapped || http ? null : fromDatabase(err);
    if (mapped) {
      ({ status, message } = mapped);
    } else if (http) {
      ({ status, message } = http);
    } else if (database) {
      req.log?.warn({ err: (err as Error).message, code: (err as { code?: unknown }).code }, 'a request\'s database work failed: answered 503');
      status = 503;
      message = database;
      res.setHeader('Retry-After', '5');
    } else {
      const errorId = randomUUID();
      req.log?.error({ err, errorId }, 'unexpected error');
      status = 500;
      message = `Internal Server Error (error id ${errorId})`;
      res.setHeader('X-Error-Id', errorId);
    }
  }
  if (res.headersSent) return;
  if (err instanceof ValidationError && err.problems) {
    res.status(status).json({ message, errors: err.problems });
    return;
  }
  res.status(status).type('text/plain').send(message);
};
