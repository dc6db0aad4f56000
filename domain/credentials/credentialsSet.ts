import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { isUuid } from '../shared/ids.js';

/**
 * A basic credentials set: the username and password an MQTT device provider
 * logs in with. The password arrives already hashed (scrypt, salted); the
 * clear text is never stored or returned.
 */
export type CredentialsSetEvent =
  | { type: 'CredentialsSetCreated'; data: { id: string; username: string; passwordHash: string; createdBy: string; at: string } }
  | { type: 'CredentialsSetDeleted'; data: { id: string; at: string } };

export type CredentialsSetCommand =
  | { type: 'CreateCredentialsSet'; id: string; username: string; passwordHash: string; createdBy: string; at: string }
  | { type: 'DeleteCredentialsSet'; id: string; at: string };

export type CredentialsSetState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; username: string };

export const credentialsSetStream = (id: string) => `credentials-${id}`;
export const CREDENTIALS_NOT_FOUND = 'Basic credentials set not found';

/** MQTT logins with a UUID username are user logins (user id + access token), so a credentials set cannot take that shape. */
export function checkUsername(username: string): void {
  if (isUuid(username)) throw ValidationError.field('username', 'must not have the shape of a UUID');
}

export const credentialsSetDecider: Decider<CredentialsSetCommand, CredentialsSetState, CredentialsSetEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateCredentialsSet': {
        if (state.status !== 'none') throw new ConflictError(`Basic credentials set ${command.id} already exists`);
        checkUsername(command.username);
        const { id, username, passwordHash, createdBy, at } = command;
        return [{ type: 'CredentialsSetCreated', data: { id, username, passwordHash, createdBy, at } }];
      }
      case 'DeleteCredentialsSet':
        if (state.status !== 'active') throw new NotFoundError(CREDENTIALS_NOT_FOUND);
        return [{ type: 'CredentialsSetDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'CredentialsSetCreated':
        return { status: 'active', id: event.data.id, username: event.data.username };
      case 'CredentialsSetDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
