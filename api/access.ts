import type { Deps } from './deps.js';
import type { Principal } from '../domain/access/principal.js';
import { satisfies, type Need } from '../domain/access/scopes.js';
import { scopesHeld } from '../projections/access.js';
import { ForbiddenError, NotFoundError, type ValidationError } from '../domain/shared/errors.js';

// The read side of access rights lives with their read model (`projections/access.ts`); routes take it from here.
export { readableBy, scopesOfUser, writableBy } from '../projections/access.js';

/** Every scope the principal holds on a resource, directly, through its usergroups or its organization units. */
export const scopesOn = (deps: Pick<Deps, 'db'>, principal: Principal, resourceId: string): Promise<Set<string>> => scopesHeld(deps.db, principal, resourceId);

/**
 * The object check. A resource the caller cannot read is reported as missing
 * (404), so its existence does not leak; one readable but not enough for
 * `need` is 403.
 */
export async function requireAccess(deps: Deps, principal: Principal, resourceId: string, need: Need, notFound = 'Not Found'): Promise<Set<string>> {
  const held = await scopesOn(deps, principal, resourceId);
  if (!satisfies(held, 'read')) throw new NotFoundError(notFound);
  if (!satisfies(held, need)) throw new ForbiddenError();
  return held;
}

/**
 * The object check for an id named in a request body (a credentials set a
 * topic is reserved for, a channel's recipient). A reference the caller
 * cannot read answers exactly as one that does not exist, with the same 422,
 * so a body can never be used to learn whether someone else's resource
 * exists; one readable but not enough for `need` is 403.
 */
export async function requireReference(deps: Deps, principal: Principal, resourceId: unknown, need: Need, missing: ValidationError): Promise<Set<string>> {
  if (typeof resourceId !== 'string') throw missing;
  const held = await scopesOn(deps, principal, resourceId);
  if (!satisfies(held, 'read')) throw missing;
  if (!satisfies(held, need)) throw new ForbiddenError();
  return held;
}
