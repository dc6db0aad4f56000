import type { Decider } from '../shared/decider.js';
import { ValidationError } from '../shared/errors.js';
import { isResourceId, isUuid } from '../shared/ids.js';
import { CREATOR_SCOPE, SCOPES, type Scope } from './scopes.js';
import { OWNED_RESOURCES } from './resources.js';
import type { DomainEvent } from '../shared/events.js';

/**
 * Access rights on one resource, as records `{resourceType, resourceId,
 * subjectType, subjectId, scope}`. `singleton` (one user) is stored as `user`,
 * its alias. A grant replaces the subject's scope on the resource; a revoke
 * removes the named scopes (all of them when none are named), and the record
 * goes once no scope is left.
 */
export type SubjectTypeInput = 'singleton' | 'user' | 'group' | 'orgUnit';
export type SubjectType = 'user' | 'group' | 'orgUnit';

export interface AccessRecord {
  resourceType: string;
  resourceId: string;
  subjectType: SubjectType;
  subjectId: string;
  scope: Scope[];
}

export type AccessEvent =
  | { type: 'AccessGranted'; data: AccessRecord & { at: string } }
  | { type: 'AccessRevoked'; data: AccessRecord & { at: string } };

export type AccessCommand = {
  type: 'Grant' | 'Revoke';
  resourceType: string;
  resourceId: string;
  subjectType: SubjectTypeInput;
  subjectId: string;
  /** For a revoke, undefined means every scope. */
  scope?: Scope[];
  at: string;
};

/** Grants carry the whole new scope, so the stream needs no state to decide. */
export type AccessState = null;

export const accessStream = (resourceId: string) => `access-${resourceId}`;

export const canonicalSubjectType = (type: SubjectTypeInput): SubjectType => (type === 'singleton' ? 'user' : type);

/** The two id kinds are not interchangeable: a user is a UUID, a group a 24-hex id. */
export function checkSubject(type: SubjectType, id: string): void {
  if (type === 'user' && !isUuid(id)) throw ValidationError.field('subjectId', 'must be a user UUID when subjectType is singleton or user');
  if (type === 'group' && !isResourceId(id)) throw ValidationError.field('subjectId', 'must be a 24-character hexadecimal usergroup id when subjectType is group');
}

/** Scopes without repeats, in the fixed order admin, write, read, peek. */
export const normalizeScope = (scope: readonly string[]): Scope[] => SCOPES.filter((s) => scope.includes(s));

export const accessDecider: Decider<AccessCommand, AccessState, AccessEvent> = {
  initialState: () => null,
  decide(command) {
    if (!isResourceId(command.resourceId)) throw ValidationError.field('resourceId', 'must be a 24-character hexadecimal id');
    const subjectType = canonicalSubjectType(command.subjectType);
    checkSubject(subjectType, command.subjectId);
    const subjectId = subjectType === 'user' ? command.subjectId.toLowerCase() : command.subjectId;
    const base = { resourceType: command.resourceType, resourceId: command.resourceId, subjectType, subjectId, at: command.at };
    switch (command.type) {
      case 'Grant': {
        const scope = normalizeScope(command.scope ?? []);
        if (scope.length === 0) throw ValidationError.field('scope', 'must name at least one scope');
        return [{ type: 'AccessGranted', data: { ...base, scope } }];
      }
      case 'Revoke':
        return [{ type: 'AccessRevoked', data: { ...base, scope: normalizeScope(command.scope ?? SCOPES) } }];
      default: {
        const _: never = command.type;
        return _;
      }
    }
  },
  evolve: (state) => state,
};

/** The rights on one resource, by subject (`user:<uuid>`, `group:<id>`, `orgUnit:<name>`). */
export type Rights = Record<string, { subjectType: SubjectType; subjectId: string; scope: Scope[] }>;

const CREATED = new Set(OWNED_RESOURCES.map((r) => r.created));
const DELETED = new Set(OWNED_RESOURCES.map((r) => r.deleted));

/** The event types that change the rights on a resource, on its own stream or its access stream. */
export const RIGHTS_EVENTS = ['AccessGranted', 'AccessRevoked', 'DeviceClaimed', ...CREATED, ...DELETED];

/**
 * The rights on `resourceId` after an event, as the access read model applies
 * them: a grant replaces the subject's scope, a revoke removes scopes (and the
 * record once none is left), a creation gives its creator every scope, a
 * claim gives its grants, a deletion removes them all. The removal of a
 * deleted user's or usergroup's rights everywhere is not on the resource's
 * streams, so it is not folded here.
 */
export function evolveRights(resourceId: string, rights: Rights, event: DomainEvent): Rights {
  const data = event.data as { id?: unknown; resourceId?: unknown; createdBy?: unknown };
  const set = (next: Rights, subjectType: SubjectType, subjectId: string, scope: Scope[]) => {
    next[`${subjectType}:${subjectId}`] = { subjectType, subjectId, scope: [...scope] };
    return next;
  };
  if (event.type === 'AccessGranted' || event.type === 'AccessRevoked') {
    const d = event.data as AccessRecord;
    if (d.resourceId !== resourceId) return rights;
    const key = `${d.subjectType}:${d.subjectId}`;
    if (event.type === 'AccessGranted') return set({ ...rights }, d.subjectType, d.subjectId, d.scope);
    const held = rights[key];
    if (!held) return rights;
    const scope = held.scope.filter((s) => !d.scope.includes(s));
    const { [key]: _gone, ...rest } = rights;
    return scope.length ? set(rest, d.subjectType, d.subjectId, scope) : rest;
  }
  if (data.id !== resourceId) return rights;
  if (CREATED.has(event.type)) return typeof data.createdBy === 'string' ? set({ ...rights }, 'user', data.createdBy, CREATOR_SCOPE) : rights;
  if (DELETED.has(event.type)) return {};
  if (event.type === 'DeviceClaimed') {
    let next = { ...rights };
    for (const g of (event.data as { grants: { subjectType: SubjectType; subjectId: string; scope: Scope[] }[] }).grants) next = set(next, g.subjectType, g.subjectId, g.scope);
    return next;
  }
  return rights;
}
