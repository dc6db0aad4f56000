import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { jsonEqual } from '../devices/device.js';

/**
 * A channel pushes every change of a device (or of any device in a group) to
 * an outside service. Exactly one target and exactly one protocol. `mqtt` and
 * `http` deliver; `cloudIotHub` and the building-system protocols `bacnet`,
 * `knx` and `modbus` are validated and stored, and their deliveries are
 * logged as unsupported in this build.
 */
export const PROTOCOLS = ['http', 'mqtt', 'cloudIotHub', 'bacnet', 'knx', 'modbus'] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export type ChannelDoc = Record<string, unknown> & { name?: string; iotnode?: string; deviceGroup?: string };
export interface ChannelSecrets {
  /** The write-only `Authorization` header of an `http` channel. */
  authorization?: string;
}

export type ChannelEvent =
  | { type: 'ChannelCreated'; data: { id: string; createdBy: string; protocol: Protocol; doc: ChannelDoc; secrets: ChannelSecrets; at: string } }
  /** The channel as replaced: its name and its protocol's settings; the target and the protocol stay. */
  | { type: 'ChannelReplaced'; data: { id: string; doc: ChannelDoc; secrets: ChannelSecrets; at: string } }
  | { type: 'ChannelDeleted'; data: { id: string; at: string } };

export type ChannelCommand =
  /** With `once`, a channel that already exists is no event instead of a conflict: a creation under a derived id, repeated. */
  | { type: 'CreateChannel'; id: string; createdBy: string; body: ChannelDoc; once?: boolean; at: string }
  | { type: 'ReplaceChannel'; id: string; body: ChannelDoc; at: string }
  | { type: 'DeleteChannel'; id: string; at: string };

export type ChannelState =
  | { status: 'none' | 'deleted' }
  | { status: 'active'; id: string; protocol: Protocol; doc: ChannelDoc; secrets: ChannelSecrets };

export const channelStream = (id: string) => `channel-${id}`;
export const CHANNEL_NOT_FOUND = 'Channel not found';

/** The target and the protocol, with the contract's rejections; the `Authorization` header moves to the secrets. */
export function checkChannel(body: ChannelDoc): { protocol: Protocol; doc: ChannelDoc; secrets: ChannelSecrets } {
  const targets = (['iotnode', 'deviceGroup'] as const).filter((t) => body[t] !== undefined && body[t] !== null);
  if (targets.length !== 1) {
    throw ValidationError.field('iotnode', `or deviceGroup: exactly one target is required, found ${targets.length ? targets.join(', ') : 'none'}`);
  }
  const found = PROTOCOLS.filter((p) => body[p] !== undefined && body[p] !== null);
  if (found.length !== 1) {
    throw ValidationError.field('protocol', `exactly one of ${PROTOCOLS.join(', ')} is required, found ${found.length ? found.join(', ') : 'none'}`);
  }
  const doc = structuredClone(body);
  delete doc._id;
  const secrets: ChannelSecrets = {};
  const http = doc.http as { headers?: Record<string, unknown> } | undefined;
  if (http?.headers) {
    for (const key of Object.keys(http.headers)) {
      if (key.toLowerCase() === 'authorization') {
        secrets.authorization = String(http.headers[key]);
        delete http.headers[key];
      }
    }
  }
  return { protocol: found[0]!, doc, secrets };
}

export const channelDecider: Decider<ChannelCommand, ChannelState, ChannelEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateChannel': {
        if (command.once && state.status === 'active') return [];
        if (command.once && state.status === 'deleted') throw new NotFoundError(CHANNEL_NOT_FOUND);
        if (state.status !== 'none') throw new ConflictError(`Channel ${command.id} already exists`);
        const { protocol, doc, secrets } = checkChannel(command.body);
        return [{ type: 'ChannelCreated', data: { id: command.id, createdBy: command.createdBy, protocol, doc, secrets, at: command.at } }];
      }
      case 'ReplaceChannel': {
        if (state.status !== 'active') throw new NotFoundError(CHANNEL_NOT_FOUND);
        const { protocol, doc, secrets } = checkChannel(command.body);
        // Deliveries follow a channel's target from its creation: another target or protocol is another channel.
        for (const target of ['iotnode', 'deviceGroup'] as const) {
          if ((doc[target] ?? null) !== (state.doc[target] ?? null)) throw ValidationError.field(target, 'cannot change: a channel keeps its target; create another channel for another one');
        }
        if (protocol !== state.protocol) throw ValidationError.field(protocol, `cannot replace ${state.protocol}: a channel keeps its protocol; create another channel for another one`);
        // A write-only Authorization left out is kept: it is never shown, so a client cannot send it back.
        const kept: ChannelSecrets = { ...state.secrets, ...secrets };
        if (protocol !== 'http') delete kept.authorization;
        if (jsonEqual(doc, state.doc) && jsonEqual(kept, state.secrets)) return [];
        return [{ type: 'ChannelReplaced', data: { id: command.id, doc, secrets: kept, at: command.at } }];
      }
      case 'DeleteChannel':
        if (state.status !== 'active') throw new NotFoundError(CHANNEL_NOT_FOUND);
        return [{ type: 'ChannelDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'ChannelCreated':
        return { status: 'active', id: event.data.id, protocol: event.data.protocol, doc: event.data.doc, secrets: event.data.secrets };
      case 'ChannelReplaced':
        return state.status === 'active' ? { ...state, doc: event.data.doc, secrets: event.data.secrets } : state;
      case 'ChannelDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
