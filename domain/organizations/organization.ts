import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/**
 * An organization unit: a name, a description and a place in a tree (its
 * parent unit, or none for a top unit). A user belongs to a unit when their
 * `attributes.organization` names it; an `orgUnit` access right given to a
 * unit's name applies to the members of that unit and of every unit below it.
 *
 * The name is the unit's identity in access rights and in users' attributes,
 * so it never changes. Unique names, a tree without cycles and the depth cap
 * are checked by the API against the read model under one lock, since they
 * span units; the decider keeps the rules of one unit.
 */
export interface UnitRef {
  id: string;
  name: string;
}

export type OrganizationEvent =
  | { type: 'OrganizationCreated'; data: { id: string; name: string; description?: string; parent: UnitRef | null; createdBy: string; at: string } }
  | { type: 'OrganizationUpdated'; data: { id: string; name: string; description?: string; parent: UnitRef | null; moved: boolean; at: string } }
  | { type: 'OrganizationDeleted'; data: { id: string; name: string; at: string } };

export type OrganizationCommand =
  | { type: 'CreateOrganization'; id: string; name: string; description?: string; parent: UnitRef | null; createdBy: string; at: string }
  /** A PUT: the whole unit again; `name` must be the unit's own. */
  | { type: 'UpdateOrganization'; id: string; name: string; description?: string; parent: UnitRef | null; at: string }
  | { type: 'DeleteOrganization'; id: string; at: string };

export type OrganizationState =
  | { status: 'none' | 'deleted' }
  | { status: 'active'; id: string; name: string; description?: string; parent: UnitRef | null };

export const organizationStream = (id: string) => `organization-${id}`;
export const ORGANIZATION_NOT_FOUND = 'Organization not found';
/** How many levels a tree may have, a top unit being level 1. */
export const MAX_DEPTH = 10;

/** A name of 1 to 100 characters with something other than spaces, and no spaces around it. */
export function checkUnitName(name: string): void {
  if (name.trim() !== name || name.length === 0) throw ValidationError.field('name', 'must not be empty or start or end with spaces');
}

export const organizationDecider: Decider<OrganizationCommand, OrganizationState, OrganizationEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateOrganization': {
        if (state.status !== 'none') throw new ConflictError(`Organization ${command.id} already exists`);
        checkUnitName(command.name);
        if (command.parent?.id === command.id) throw ValidationError.field('parent', 'cannot be the unit itself');
        const { id, name, description, parent, createdBy, at } = command;
        return [{ type: 'OrganizationCreated', data: { id, name, ...(description !== undefined ? { description } : {}), parent, createdBy, at } }];
      }
      case 'UpdateOrganization': {
        if (state.status !== 'active') throw new NotFoundError(ORGANIZATION_NOT_FOUND);
        if (command.name !== state.name) throw ValidationError.field('name', 'cannot be changed: it names the unit in access rights and in users\' attributes.organization');
        if (command.parent?.id === command.id) throw ValidationError.field('parent', 'cannot be the unit itself');
        const moved = (command.parent?.id ?? null) !== (state.parent?.id ?? null);
        if (!moved && command.description === state.description) return [];
        const { id, name, description, parent, at } = command;
        return [{ type: 'OrganizationUpdated', data: { id, name, ...(description !== undefined ? { description } : {}), parent, moved, at } }];
      }
      case 'DeleteOrganization':
        if (state.status !== 'active') throw new NotFoundError(ORGANIZATION_NOT_FOUND);
        return [{ type: 'OrganizationDeleted', data: { id: command.id, name: state.name, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'OrganizationCreated':
      case 'OrganizationUpdated': {
        const { id, name, description, parent } = event.data;
        return { status: 'active', id, name, ...(description !== undefined ? { description } : {}), parent };
      }
      case 'OrganizationDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
