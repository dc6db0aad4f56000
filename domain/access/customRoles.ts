import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { BUILTIN_ROLES, type Permissions } from './roles.js';

/**
 * Custom roles: a name and the HTTP methods it allows per resource type.
 * Names never shadow a built-in role, compared without case, so `Admin`
 * cannot pass for `admin` in a list of roles.
 */
export type RoleEvent =
  | { type: 'RoleCreated'; data: { name: string; permissions: Permissions; at: string } }
  | { type: 'RoleReplaced'; data: { name: string; permissions: Permissions; at: string } }
  | { type: 'RoleDeleted'; data: { name: string; at: string } };

export type RoleCommand =
  | { type: 'CreateRole'; name: string; permissions: Permissions; at: string }
  | { type: 'ReplaceRole'; name: string; permissions: Permissions; at: string }
  | { type: 'DeleteRole'; name: string; at: string };

export type RoleState = { status: 'none' | 'deleted' } | { status: 'active'; permissions: Permissions };

export const roleStream = (name: string) => `role-${name}`;

export const clashesWithBuiltin = (name: string): boolean => BUILTIN_ROLES.some((b) => b.toLowerCase() === name.toLowerCase());

export const roleDecider: Decider<RoleCommand, RoleState, RoleEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (clashesWithBuiltin(command.name)) throw ValidationError.field('name', `${command.name} is a built-in role`);
    switch (command.type) {
      case 'CreateRole':
        if (state.status === 'active') throw new ConflictError(`ERR - name ${command.name} is taken`);
        return [{ type: 'RoleCreated', data: { name: command.name, permissions: command.permissions, at: command.at } }];
      case 'ReplaceRole':
        if (state.status !== 'active') throw new NotFoundError('Role not found');
        return [{ type: 'RoleReplaced', data: { name: command.name, permissions: command.permissions, at: command.at } }];
      case 'DeleteRole':
        if (state.status !== 'active') throw new NotFoundError('Role not found');
        return [{ type: 'RoleDeleted', data: { name: command.name, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(_state, event) {
    switch (event.type) {
      case 'RoleCreated':
      case 'RoleReplaced':
        return { status: 'active', permissions: event.data.permissions };
      case 'RoleDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
