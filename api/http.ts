import type { Logger } from 'pino';
import type { Request } from 'express';
import type { Principal } from '../domain/access/principal.js';
import type { Operation } from './openapi.js';
import type { CommandContext } from '../domain/shared/decider.js';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The request id: also the correlation id of every event this request writes. */
      id: string;
      log: Logger;
      /** Set by `authenticate` on every route but login. */
      principal?: Principal;
      /** The document's operation the request names, matched once before authentication (`knownOperation`). */
      operation?: Operation;
    }
  }
}

/** The caller, or a 401 if the route forgot `authenticate` (a programming error, not a client one). */
export function principalOf(req: Request): Principal {
  if (!req.principal) throw new Error(`route ${req.method} ${req.path} used the principal without authenticate`);
  return req.principal;
}

/** The context of events written on behalf of this request. */
export function commandContext(req: Request, now: Date): CommandContext {
  return { actor: principalOf(req).id, correlationId: req.id, now: now.toISOString() };
}
