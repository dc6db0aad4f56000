import type { Decider } from '../shared/decider.js';
import { ConflictError } from '../shared/errors.js';

/**
 * Usernames are unique, case-insensitively. Each name has a stream of its own,
 * so two concurrent creations of the same name meet on one stream revision
 * and exactly one wins.
 */
export type UsernameEvent =
  | { type: 'UsernameClaimed'; data: { username: string; userId: string } }
  | { type: 'UsernameReleased'; data: { username: string; userId: string } };

export type UsernameCommand = { type: 'Claim' | 'Release'; username: string; userId: string };

export type UsernameState = { holder: string | null };

/** A username as uniqueness sees it: the claim stream's name and the users read model's unique key. */
export const usernameKey = (username: string): string => username.toLowerCase();

export const usernameStream = (username: string) => `username-${usernameKey(username)}`;

export const usernameDecider: Decider<UsernameCommand, UsernameState, UsernameEvent> = {
  initialState: () => ({ holder: null }),
  decide(command, state) {
    switch (command.type) {
      case 'Claim':
        if (state.holder === command.userId) return [];
        if (state.holder !== null) throw new ConflictError(`ERR - username ${command.username} is taken`);
        return [{ type: 'UsernameClaimed', data: { username: command.username, userId: command.userId } }];
      case 'Release':
        return state.holder === command.userId ? [{ type: 'UsernameReleased', data: { username: command.username, userId: command.userId } }] : [];
      default: {
        const _: never = command.type;
        return _;
      }
    }
  },
  evolve(_state, event) {
    switch (event.type) {
      case 'UsernameClaimed':
        return { holder: event.data.userId };
      case 'UsernameReleased':
        return { holder: null };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
