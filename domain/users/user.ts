import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/** The user record, in the identity provider's field style. */
export interface Profile {
  username: string;
  email?: string;
  firstName?: string;
  lastName?: string;
  phoneNumber?: string;
  enabled: boolean;
  requiredActions: string[];
  attributes: {
    globalVisibility?: 'true' | 'false';
    language?: string;
    organization?: string[];
    roles?: string[];
    [name: string]: unknown;
  };
}

export const UPDATE_PASSWORD = 'UPDATE_PASSWORD';

/** An organization unit a user event was made through (its routes create, add, remove and reset members). */
export interface Unit {
  id: string;
  name: string;
}

/**
 * `organization` on UserCreated and PasswordReset: the unit whose admin
 * created the member or reset their password. Membership itself is
 * `attributes.organization` (unit names); joining and leaving through a unit
 * are events of their own, carrying the username, so the unit's log reads
 * the same whenever it is rebuilt.
 */
export type UserEvent =
  | { type: 'UserCreated'; data: { id: string; profile: Profile; passwordHash: string; organization?: Unit; at: string } }
  | { type: 'UserUpdated'; data: { id: string; changes: Partial<Omit<Profile, 'username'>>; at: string } }
  | { type: 'PasswordChanged'; data: { id: string; passwordHash: string; at: string } }
  | { type: 'PasswordReset'; data: { id: string; passwordHash: string; organization?: Unit; username?: string; at: string } }
  | { type: 'UserJoinedOrganization'; data: { id: string; username: string; organization: Unit; at: string } }
  | { type: 'UserLeftOrganization'; data: { id: string; username: string; organization: Unit; at: string } }
  | { type: 'UserDeleted'; data: { id: string; at: string } };

export type UserCommand =
  /** `temporaryPassword`: the service chose the password, so the user must set their own (UPDATE_PASSWORD). */
  | { type: 'CreateUser'; id: string; profile: Profile; passwordHash: string; temporaryPassword: boolean; organization?: Unit; at: string }
  | { type: 'UpdateUser'; id: string; changes: Partial<Omit<Profile, 'username'>>; at: string }
  | { type: 'ChangePassword'; id: string; passwordHash: string; at: string }
  | { type: 'ResetPassword'; id: string; passwordHash: string; organization?: Unit; at: string }
  | { type: 'JoinOrganization'; id: string; organization: Unit; at: string }
  | { type: 'LeaveOrganization'; id: string; organization: Unit; at: string }
  | { type: 'DeleteUser'; id: string; at: string };

/**
 * `tokenVersion` counts the user's password changes and resets: an access
 * token carries the version it was issued under, and only a token of the
 * current version is accepted, so every token issued before a password
 * change or reset stops working with it.
 */
export type UserState =
  | { status: 'none' }
  | { status: 'active'; id: string; profile: Profile; passwordHash: string; tokenVersion: number }
  | { status: 'deleted' };

export const userStream = (id: string) => `user-${id}`;
/** Whether a stream is a user's (`userStream`). */
export const isUserStream = (streamId: string) => streamId.startsWith('user-');

export const userDecider: Decider<UserCommand, UserState, UserEvent> = {
  initialState: () => ({ status: 'none' }),

  decide(command, state) {
    if (command.type === 'CreateUser') {
      if (state.status !== 'none') throw new ConflictError(`User ${command.id} already exists`);
      const profile = command.temporaryPassword ? withAction(command.profile, UPDATE_PASSWORD) : command.profile;
      const unit = command.organization;
      if (unit && !(profile.attributes.organization ?? []).includes(unit.name)) throw ValidationError.field('attributes.organization', `must name ${unit.name}, the unit creating the member`);
      return [{ type: 'UserCreated', data: { id: command.id, profile, passwordHash: command.passwordHash, ...(unit ? { organization: unit } : {}), at: command.at } }];
    }
    if (state.status !== 'active') throw new NotFoundError('User not found');
    switch (command.type) {
      case 'UpdateUser':
        if ('username' in command.changes) throw ValidationError.field('username', 'cannot be changed');
        if (Object.keys(command.changes).length === 0) return [];
        return [{ type: 'UserUpdated', data: { id: command.id, changes: command.changes, at: command.at } }];
      case 'ChangePassword':
        return [{ type: 'PasswordChanged', data: { id: command.id, passwordHash: command.passwordHash, at: command.at } }];
      case 'ResetPassword': {
        const unit = command.organization;
        if (unit && !unitsOf(state.profile).includes(unit.name)) throw new NotFoundError('Member not found');
        const through = unit ? { organization: unit, username: state.profile.username } : {};
        return [{ type: 'PasswordReset', data: { id: command.id, passwordHash: command.passwordHash, ...through, at: command.at } }];
      }
      case 'JoinOrganization':
        if (unitsOf(state.profile).includes(command.organization.name)) return [];
        return [{ type: 'UserJoinedOrganization', data: { id: command.id, username: state.profile.username, organization: command.organization, at: command.at } }];
      case 'LeaveOrganization':
        if (!unitsOf(state.profile).includes(command.organization.name)) throw new NotFoundError('Member not found');
        return [{ type: 'UserLeftOrganization', data: { id: command.id, username: state.profile.username, organization: command.organization, at: command.at } }];
      case 'DeleteUser':
        return [{ type: 'UserDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },

  evolve(state, event) {
    switch (event.type) {
      case 'UserCreated':
        return { status: 'active', id: event.data.id, profile: event.data.profile, passwordHash: event.data.passwordHash, tokenVersion: 0 };
      case 'UserUpdated':
        return state.status === 'active' ? { ...state, profile: applyChanges(state.profile, event.data.changes) } : state;
      case 'PasswordChanged':
        return state.status === 'active'
          ? {
              ...state,
              passwordHash: event.data.passwordHash,
              tokenVersion: state.tokenVersion + 1,
              profile: { ...state.profile, requiredActions: state.profile.requiredActions.filter((a) => a !== UPDATE_PASSWORD) },
            }
          : state;
      case 'PasswordReset':
        return state.status === 'active'
          ? {
              ...state,
              passwordHash: event.data.passwordHash,
              tokenVersion: state.tokenVersion + 1,
              profile: withAction(state.profile, UPDATE_PASSWORD),
            }
          : state;
      case 'UserJoinedOrganization':
        return state.status === 'active' ? { ...state, profile: withUnits(state.profile, [...unitsOf(state.profile), event.data.organization.name]) } : state;
      case 'UserLeftOrganization':
        return state.status === 'active' ? { ...state, profile: withUnits(state.profile, unitsOf(state.profile).filter((n) => n !== event.data.organization.name)) } : state;
      case 'UserDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};

/** The names of the units a user belongs to. */
export const unitsOf = (profile: Profile): string[] => (Array.isArray(profile.attributes.organization) ? profile.attributes.organization : []);

const withUnits = (profile: Profile, organization: string[]): Profile => ({ ...profile, attributes: { ...profile.attributes, organization } });

const withAction = (profile: Profile, action: string): Profile =>
  profile.requiredActions.includes(action) ? profile : { ...profile, requiredActions: [...profile.requiredActions, action] };

/** A shallow merge, except `attributes`, which merges one level deeper so one attribute can change alone. */
export function applyChanges(profile: Profile, changes: Partial<Omit<Profile, 'username'>>): Profile {
  const next = { ...profile, ...changes };
  if (changes.attributes) next.attributes = { ...profile.attributes, ...changes.attributes };
  return next;
}
