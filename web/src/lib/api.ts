/**
 * The one way the panel calls the platform: the public REST API under /api,
 * with the session's bearer token. A 401 on a call that carried a token means
 * the token expired: the call waits for the user to log in again (the page
 * stays as it is) and is then sent once more.
 */
/** One problem of a refused request: the field it names (`spec.temperature`, `examples[0]`) and why. */
export interface Problem {
  field: string;
  problem: string;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** The field a 422 `ERR - <field> <why>` names. */
    readonly field?: string,
    readonly why?: string,
    /** Every problem a 422 names: the `errors` of a JSON body, or the one of `ERR - <field> <why>`. */
    readonly problems: Problem[] = field ? [{ field, problem: why ?? '' }] : [],
  ) {
    super(message);
  }
}

interface Hooks {
  token(): string | null;
  /** Resolves with a fresh token once the user logged in again; rejects when they gave up. */
  relogin(): Promise<string>;
}

let hooks: Hooks = { token: () => null, relogin: () => Promise.reject(new ApiError(401, 'Not logged in')) };
export const setApiHooks = (h: Hooks) => {
  hooks = h;
};

export interface CallOptions {
  body?: unknown;
  form?: FormData;
  signal?: AbortSignal;
  /** No token and no relogin (the login call itself). */
  anonymous?: boolean;
  headers?: Record<string, string>;
}

export interface Answer<T> {
  status: number;
  body: T;
  headers: Headers;
}

/**
 * An error body: plain text (the message itself), or, where a validation found
 * several problems at once, JSON `{message, errors: [{field, problem}]}`.
 */
export function errorOf(status: number, statusText: string, type: string, text: string): ApiError {
  let message = text.trim();
  let problems: Problem[] | undefined;
  if (type.includes('application/json')) {
    try {
      const body = JSON.parse(text) as { message?: unknown; errors?: unknown };
      if (typeof body?.message === 'string') message = body.message;
      if (Array.isArray(body?.errors)) problems = body.errors.filter((e): e is Problem => typeof e?.field === 'string' && typeof e?.problem === 'string');
    } catch {
      // Not JSON after all: the text is the message.
    }
  }
  message ||= statusText || `HTTP ${status}`;
  const { field, why } = status === 422 ? parseValidation(message) : {};
  return new ApiError(status, message, field, why, problems?.length ? problems : undefined);
}

/** Splits `ERR - <field> <why>` into its parts. */
export function parseValidation(message: string): { field?: string; why?: string } {
  const m = /^ERR - (\S+) ([\s\S]*)$/.exec(message);
  return m ? { field: m[1], why: m[2] } : {};
}

export async function call<T = unknown>(method: string, path: string, options: CallOptions = {}): Promise<Answer<T>> {
  const send = async (token: string | null): Promise<Response> => {
    const headers: Record<string, string> = { accept: 'application/json, text/plain', ...options.headers };
    if (token) headers.authorization = `Bearer ${token}`;
    let body: BodyInit | undefined;
    if (options.form) body = options.form;
    else if (options.body !== undefined) {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(options.body);
    }
    try {
      return await fetch(path, { method, headers, body, signal: options.signal });
    } catch (error) {
      if ((error as Error).name === 'AbortError') throw error;
      throw new ApiError(0, 'The platform cannot be reached. Check the network connection; the panel retries when you act again.');
    }
  };
  const token = options.anonymous ? null : hooks.token();
  let res = await send(token);
  if (res.status === 401 && token && !options.anonymous) res = await send(await hooks.relogin());
  const type = res.headers.get('content-type') ?? '';
  const text = res.status === 204 ? '' : await res.text();
  if (!res.ok) throw errorOf(res.status, res.statusText, type, text);
  const body = (type.includes('application/json') && text ? JSON.parse(text) : text || undefined) as T;
  return { status: res.status, body, headers: res.headers };
}

export const api = async <T = unknown>(method: string, path: string, options?: CallOptions): Promise<T> => (await call<T>(method, path, options)).body;
export const get = <T = unknown>(path: string, signal?: AbortSignal) => api<T>('GET', path, { signal });

/** An error in words a person understands, for every status the API answers. */
export function describe(error: unknown, what = 'This'): string {
  if (!(error instanceof ApiError)) return error instanceof Error ? `${what} failed: ${error.message}` : `${what} failed.`;
  switch (error.status) {
    case 0:
      return error.message;
    case 401:
      return 'You are not logged in.';
    case 403:
      return error.message === 'Forbidden' ? 'Your role does not allow this.' : error.message || 'You may look at this but not change it.';
    case 404:
      return `${what} was not found, or you have no access to it.`;
    case 409:
      return error.message;
    case 412:
      return 'Someone else changed this in the meantime. Reload to see their change.';
    case 413:
      return `Too large: ${error.message.replace(/^ERR - /, '')}`;
    case 422:
      return error.message.replace(/^ERR - /, '');
    case 503:
      return `The platform is busy; the change is stored and shows shortly. (${error.message})`;
    default:
      return error.status >= 500 ? `The platform failed (${error.status}): ${error.message}` : error.message;
  }
}

/** True when the API does not offer this route on this platform (yet). */
export const isMissingRoute = (error: unknown) => error instanceof ApiError && (error.status === 404 || error.status === 405) && /^not found$/i.test(error.message);

/** A binary resource (an image) with the session's token, as a blob. */
export async function getBlob(path: string, token: string | null = hooks.token()): Promise<Blob> {
  let res = await fetch(path, { headers: token ? { authorization: `Bearer ${token}` } : {} }).catch(() => {
    throw new ApiError(0, 'The platform cannot be reached.');
  });
  if (res.status === 401 && token) res = await fetch(path, { headers: { authorization: `Bearer ${await hooks.relogin()}` } });
  if (!res.ok) throw errorOf(res.status, res.statusText, res.headers.get('content-type') ?? '', await res.text());
  return res.blob();
}
