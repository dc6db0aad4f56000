import { randomBytes } from 'node:crypto';
import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError } from '../shared/errors.js';

/**
 * A client application: a name, a description, and a secret it logs in to
 * MQTT with (its id as username), to consume `svc/output/v2/<app id>/…`. The
 * secret arrives hashed (scrypt, salted); the clear text is shown once, when
 * it is made, and never stored.
 */
export type AppEvent =
  | { type: 'AppCreated'; data: { id: string; name: string; description?: string; secretHash: string; createdBy: string; at: string } }
  | { type: 'AppUpdated'; data: { id: string; name: string; description?: string; at: string } }
  | { type: 'AppSecretRotated'; data: { id: string; secretHash: string; at: string } }
  | { type: 'AppDeleted'; data: { id: string; at: string } };

export type AppCommand =
  | { type: 'CreateApp'; id: string; name: string; description?: string; secretHash: string; createdBy: string; at: string }
  | { type: 'UpdateApp'; id: string; name: string; description?: string; at: string }
  | { type: 'RotateAppSecret'; id: string; secretHash: string; at: string }
  | { type: 'DeleteApp'; id: string; at: string };

export type AppState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; name: string; description?: string };

export const appStream = (id: string) => `app-${id}`;
export const APP_NOT_FOUND = 'App not found';

/** 32 random bytes, base64url: what an app logs in with. */
export const newAppSecret = (): string => randomBytes(32).toString('base64url');

const withDescription = (description: string | undefined) => (description !== undefined ? { description } : {});

export const appDecider: Decider<AppCommand, AppState, AppEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    if (command.type === 'CreateApp') {
      if (state.status !== 'none') throw new ConflictError(`App ${command.id} already exists`);
      const { id, name, description, secretHash, createdBy, at } = command;
      return [{ type: 'AppCreated', data: { id, name, ...withDescription(description), secretHash, createdBy, at } }];
    }
    if (state.status !== 'active') throw new NotFoundError(APP_NOT_FOUND);
    switch (command.type) {
      case 'UpdateApp':
        if (command.name === state.name && command.description === state.description) return [];
        return [{ type: 'AppUpdated', data: { id: command.id, name: command.name, ...withDescription(command.description), at: command.at } }];
      case 'RotateAppSecret':
        return [{ type: 'AppSecretRotated', data: { id: command.id, secretHash: command.secretHash, at: command.at } }];
      case 'DeleteApp':
        return [{ type: 'AppDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'AppCreated':
      case 'AppUpdated':
        return { status: 'active', id: event.data.id, name: event.data.name, ...withDescription(event.data.description) };
      case 'AppSecretRotated':
        return state;
      case 'AppDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
