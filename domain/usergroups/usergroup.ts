import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/**
 * A usergroup: a name, an owner (the creator, at first), members and an
 * optional app filter. Rights given to the group apply to its members. A group
 * with a filter lets its members see only the apps the filter allows (an
 * empty filter: none). Members and the filter change only through their own
 * commands; creating a group never sets them. Member events carry the
 * username, so log entries read the same whenever they are rebuilt.
 */
export interface UsergroupChanges {
  name?: string;
  owner?: string;
}

export type UsergroupEvent =
  | { type: 'UsergroupCreated'; data: { id: string; name: string; owner: string; createdBy: string; at: string } }
  | { type: 'UsergroupUpdated'; data: { id: string; changes: UsergroupChanges; ownerUsername?: string; at: string } }
  | { type: 'UsergroupMemberAdded'; data: { id: string; userId: string; username?: string; at: string } }
  | { type: 'UsergroupMemberRemoved'; data: { id: string; userId: string; username?: string; at: string } }
  | { type: 'UsergroupAppFilterSet'; data: { id: string; appIds: string[]; at: string } }
  | { type: 'UsergroupAppAllowed'; data: { id: string; appId: string; at: string } }
  | { type: 'UsergroupAppDisallowed'; data: { id: string; appId: string; at: string } }
  | { type: 'UsergroupAppFilterRemoved'; data: { id: string; at: string } }
  | { type: 'UsergroupDeleted'; data: { id: string; at: string } };

export type UsergroupCommand =
  | { type: 'CreateUsergroup'; id: string; name: string; createdBy: string; at: string }
  | { type: 'UpdateUsergroup'; id: string; changes: UsergroupChanges; ownerUsername?: string; at: string }
  | { type: 'AddMember'; id: string; userId: string; username?: string; at: string }
  | { type: 'RemoveMember'; id: string; userId: string; username?: string; at: string }
  /** Replaces the filter with exactly these apps (and turns it on). */
  | { type: 'SetAppFilter'; id: string; appIds: string[]; at: string }
  /** Adds one app to the filter, turning it on with that app alone if it was off. */
  | { type: 'AllowApp'; id: string; appId: string; at: string }
  | { type: 'DisallowApp'; id: string; appId: string; at: string }
  | { type: 'RemoveAppFilter'; id: string; at: string }
  | { type: 'DeleteUsergroup'; id: string; at: string };

export type UsergroupState =
  | { status: 'none' | 'deleted' }
  /** `appFilter`: null when the group has none. */
  | { status: 'active'; id: string; name: string; owner: string; members: string[]; appFilter: string[] | null };

/** The most apps one filter may list. */
export const MAX_FILTER_APPS = 1000;

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
      case 'UpdateUsergroup': {
        const { id, changes, ownerUsername, at } = command;
        return [{ type: 'UsergroupUpdated', data: { id, changes, ...(ownerUsername !== undefined && changes.owner !== undefined ? { ownerUsername } : {}), at } }];
      }
      case 'AddMember':
        // Adding a member twice changes nothing.
        if (state.members.includes(command.userId)) return [];
        return [{ type: 'UsergroupMemberAdded', data: { id: command.id, userId: command.userId, ...named(command.username), at: command.at } }];
      case 'RemoveMember':
        if (!state.members.includes(command.userId)) throw new NotFoundError('Member not found');
        return [{ type: 'UsergroupMemberRemoved', data: { id: command.id, userId: command.userId, ...named(command.username), at: command.at } }];
      case 'SetAppFilter': {
        const appIds = [...new Set(command.appIds)];
        if (appIds.length > MAX_FILTER_APPS) throw ValidationError.field('appIds', `must not list more than ${MAX_FILTER_APPS} apps`);
        if (state.appFilter && sameSet(state.appFilter, appIds)) return [];
        return [{ type: 'UsergroupAppFilterSet', data: { id: command.id, appIds, at: command.at } }];
      }
      case 'AllowApp':
        if (state.appFilter?.includes(command.appId)) return [];
        if ((state.appFilter?.length ?? 0) >= MAX_FILTER_APPS) throw ValidationError.field('appId', `cannot be added: a filter lists at most ${MAX_FILTER_APPS} apps`);
        return [{ type: 'UsergroupAppAllowed', data: { id: command.id, appId: command.appId, at: command.at } }];
      case 'DisallowApp':
        if (!state.appFilter?.includes(command.appId)) throw new NotFoundError('App not in the filter');
        return [{ type: 'UsergroupAppDisallowed', data: { id: command.id, appId: command.appId, at: command.at } }];
      case 'RemoveAppFilter':
        if (state.appFilter === null) return [];
        return [{ type: 'UsergroupAppFilterRemoved', data: { id: command.id, at: command.at } }];
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
        return { status: 'active', id: event.data.id, name: event.data.name, owner: event.data.owner, members: [], appFilter: null };
      case 'UsergroupUpdated':
        return state.status === 'active' ? { ...state, ...event.data.changes } : state;
      case 'UsergroupMemberAdded':
        return state.status === 'active' ? { ...state, members: [...state.members, event.data.userId] } : state;
      case 'UsergroupMemberRemoved':
        return state.status === 'active' ? { ...state, members: state.members.filter((m) => m !== event.data.userId) } : state;
      case 'UsergroupAppFilterSet':
        return state.status === 'active' ? { ...state, appFilter: event.data.appIds } : state;
      case 'UsergroupAppAllowed':
        return state.status === 'active' ? { ...state, appFilter: [...(state.appFilter ?? []), event.data.appId] } : state;
      case 'UsergroupAppDisallowed':
        return state.status === 'active' ? { ...state, appFilter: (state.appFilter ?? []).filter((a) => a !== event.data.appId) } : state;
      case 'UsergroupAppFilterRemoved':
        return state.status === 'active' ? { ...state, appFilter: null } : state;
      case 'UsergroupDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};

const named = (username: string | undefined) => (username !== undefined ? { username } : {});

const sameSet = (a: string[], b: string[]) => a.length === b.length && a.every((x) => b.includes(x));
