import type { RequestHandler } from 'express';
import { ForbiddenError, UnauthorizedError } from '../../domain/shared/errors.js';
import { isUuid } from '../../domain/shared/ids.js';
import type { Deps } from '../deps.js';
import { verifyToken } from '../../domain/access/tokens.js';
import { allowedMethods, type ResourceType } from '../../domain/access/roles.js';
import { loadCustomRoles } from '../../projections/access.js';

export const SELF = 'self';

/**
 * Resolves `Authorization: Bearer <token>` to a principal; 401 for a missing,
 * invalid or expired token, a user who is gone or disabled, or a token issued
 * before the user's latest password change or reset.
 */
export function authenticate(deps: Deps): RequestHandler {
  return async (req, _res, next) => {
    const header = req.headers.authorization ?? '';
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    const claims = match ? verifyToken(deps.jwtSecret, match[1]!) : null;
    if (!claims || !isUuid(claims.userId)) return next(new UnauthorizedError());
    // In a cluster, what another node has answered (a user disabled, a device bound) is in this node's caches before they are read.
    await deps.projections.sync(deps.config.projectionWaitMs);
    const principal = await deps.principals.forToken(claims.userId, claims.version);
    if (!principal) return next(new UnauthorizedError());
    req.principal = principal;
    next();
  };
}

/**
 * The role check: the operation's `x-resource` in the OpenAPI document names
 * the resource type, and the caller's roles must allow the HTTP method on it.
 * `x-resource: self` marks an operation on the caller's own account (setting
 * one's password), which every role may call.
 */
export function authorizeMethod(deps: Deps): RequestHandler {
  return async (req, _res, next) => {
    const resource = req.operation?.spec['x-resource'] as ResourceType | typeof SELF | undefined;
    if (!resource || resource === SELF || !req.principal) return next();
    const custom = await loadCustomRoles(deps.db, req.principal.roles);
    if (!allowedMethods(req.principal.roles, resource, custom).has(req.method.toUpperCase())) return next(new ForbiddenError());
    next();
  };
}
