import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError } from '../shared/errors.js';

/**
 * A usergroup: a name, an owner (the creator, at first) and members. Rights
 * given to the group apply to its members. Members change only through their
 * own commands; creating a group never sets them.
 */
export interface UsergroupChanges {
  name?: string;
  owner?: string;
}

export type UsergroupEvent =
  | { type: 'UsergroupCreated'; data: { id: string; name: string; owner: string; createdBy: string; at: string } }
  | { type: 'UsergroupUpdated'; data: { id: string; changes: UsergroupChanges; at: string } }
  | { type: 'UsergroupMemberAdded'; data: { id: string; userId: string; at: string } }
  | { type: 'UsergroupMemberRemoved'; data: { id: string; userId: string; at: string } }
  | { type: 'UsergroupDeleted'; data: { id: string; at: string } };

export type UsergroupCommand =
  | { type: 'CreateUsergroup'; id: string; name: string; createdBy: string; at: string }
  | { type: 'UpdateUsergroup'; id: string; changes: UsergroupChanges; at: string }
  | { type: 'AddMember'; id: string; userId: string; at: string }
  | { type: 'RemoveMember'; id: string; userId: string; at: string }
  | { type: 'DeleteUsergroup'; id: string; at: string };

export type UsergroupState =
  | { status: 'none' | 'deleted' }
  | { status: 'active'; id: string; name: string; owner: string; members: string[] };

export const usergroupStream = (id: string) => `usergroup-${id}`;

export const usergroupDecider: Decider<UsergroupCommand, UsergroupState, UsergroupEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateUsergroup') {
      if (state.status !== 'none') throw new ConflictError(`Usergroup ${command.id} already exists`);
      const { id, name, createdBy, at } = command;
      return [{ type: 'UsergroupCreated', data: { id, name, owner: createdBy, createdBy, at } }];
    }
    if (state.status !== 'active') throw new NotFoundError('Usergroup not found');
    switch (command.type) {
      case 'UpdateUsergroup':
        return [{ type: 'UsergroupUpdated', data: { id: command.id, changes: command.changes, at: command.at } }];
      case 'AddMember':
        // Adding a member twice changes nothing.
        if (state.members.includes(command.userId)) return [];
        return [{ type: 'UsergroupMemberAdded', data: { id: command.id, userId: command.userId, at: command.at } }];
      case 'RemoveMember':
        if (!state.members.includes(command.userId)) throw new NotFoundError('Member not found');
        return [{ type: 'UsergroupMemberRemoved', data: { id: command.id, userId: command.userId, at: command.at } }];
      case 'DeleteUsergroup':
        return [{ type: 'UsergroupDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'UsergroupCreated':
        return { status: 'active', id: event.data.id, name: event.data.name, owner: event.data.owner, members: [] };
      case 'UsergroupUpdated':
        return state.status === 'active' ? { ...state, ...event.data.changes } : state;
      case 'UsergroupMemberAdded':
        return state.status === 'active' ? { ...state, members: [...state.members, event.data.userId] } : state;
      case 'UsergroupMemberRemoved':
        return state.status === 'active' ? { ...state, members: state.members.filter((m) => m !== event.data.userId) } : state;
      case 'UsergroupDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
