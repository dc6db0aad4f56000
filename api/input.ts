import type { RequestHandler } from 'express';
import { jsonProblem, textProblem } from '../domain/shared/json.js';
import type { Parameter } from './openapi.js';
import { BadRequestError, type PlatformError, UnsupportedMediaTypeError, ValidationError } from '../domain/shared/errors.js';
import { storable } from '../domain/shared/time.js';

/** Content encodings a request body may arrive in; the JSON parser inflates them. */
export const BODY_ENCODINGS = ['identity', 'gzip', 'deflate', 'br'] as const;

/**
 * Refuses, before any body is read, a `Content-Encoding` the platform does
 * not decode (415), and any encoding on a multipart upload, whose parser
 * reads the bytes as they come.
 */
export function contentEncoding(): RequestHandler {
  return (req, _res, next) => {
    const header = req.headers['content-encoding'];
    if (header === undefined) return next();
    const encoding = header.trim().toLowerCase();
    const multipart = /^multipart\//i.test(req.headers['content-type'] ?? '');
    if (encoding === 'identity' || encoding === '') return next();
    if (multipart || !(BODY_ENCODINGS as readonly string[]).includes(encoding)) {
      return next(new UnsupportedMediaTypeError(`ERR - Content-Encoding ${encoding.slice(0, 40)} is not supported${multipart ? ' on uploads' : ''}; send the body as ${multipart ? 'identity' : BODY_ENCODINGS.join(', ')}`));
    }
    next();
  };
}

/**
 * The one check of everything a request carries as text, after the body is
 * parsed and before validation or any route sees it: the path, the query and
 * the body hold no NUL or lone surrogate, no key past its length cap, no
 * nesting past the depth cap, no number that is not finite
 * (`domain/shared/json.ts`). A body that fails is 422 `ERR - <field> <why>`;
 * a path or query that fails is 422 naming the parameter.
 */
export const checkInput: RequestHandler = (req, _res, next) => {
  const problem = inputProblem({ path: req.path, query: req.query as Record<string, unknown>, body: req.body }, () => req.operation?.parameters ?? []);
  if (problem) return next(problem);
  next();
};

/** What a request carries as text: its path as sent, its parsed query, its parsed body (if any). */
export interface RequestInput {
  path: string;
  query: Record<string, unknown>;
  body: unknown;
}

/** What `checkInput` refuses in a request, or null; `parameters` are its operation's (read only when the query is otherwise fine). */
export function inputProblem(req: RequestInput, parameters: () => readonly Parameter[]): PlatformError | null {
  let path: string;
  try {
    path = decodeURIComponent(req.path);
  } catch {
    return new BadRequestError('ERR - path is not valid percent-encoded UTF-8');
  }
  const inPath = textProblem(path);
  if (inPath) return ValidationError.field('path', inPath);
  const query = jsonProblem(req.query);
  if (query) return ValidationError.field(query.path || 'query', query.why);
  // The validator coerces `1e309` to Infinity and lets it pass a `maximum`; a number parameter must be finite first.
  for (const p of parameters()) {
    if (p.in !== 'query' || (p.schema?.type !== 'number' && p.schema?.type !== 'integer')) continue;
    const raw = req.query[p.name];
    if (typeof raw === 'string' && raw.trim() !== '' && !Number.isFinite(Number(raw))) return ValidationError.field(p.name, 'must be a finite number');
  }
  if (req.body !== undefined) {
    const body = jsonProblem(req.body);
    if (body) return ValidationError.field(body.path || 'body', body.why);
  }
  return null;
}

const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d{1,9})?([Zz]|[+-](\d{2}):(\d{2}))$/;
const leap = (year: number) => year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
const daysIn = (year: number, month: number) => (month === 2 ? (leap(year) ? 29 : 28) : [31, 0, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]!);

/**
 * The document's `date-time` format: an RFC 3339 date and time that names a
 * real instant. The validator's own check reads only the shape, so February
 * 30, hour 25, an offset of 99:99 or a leap second (which no JavaScript date
 * holds) would pass it and become an invalid date in a query. The instant must
 * also be one the platform stores (`storable`: years 0001 to 9999 in UTC).
 */
export function isInstant(text: string): boolean {
  const m = DATE_TIME.exec(text);
  if (!m) return false;
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const offset = [Number(m[9] ?? 0), Number(m[10] ?? 0)];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) return false;
  if (offset[0]! > 23 || offset[1]! > 59) return false;
  return storable(Date.parse(text));
}
