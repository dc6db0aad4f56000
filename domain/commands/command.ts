import type { Decider, Handled } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { API_CALL, COMMANDS, DEV_EUI, UNAVAILABLE, kindOf, normalizeDevEui, type CommandKind, type IntegrationName } from '../integrations/catalog.js';

/**
 * A command to a device or a connector, on its own stream `command-<id>`.
 * Accepted by the platform means stored; a reactor then hands it to the
 * integration (the network server, a broker) and records what came of it.
 * A queued downlink then follows the network server's events:
 *
 *   requested ─► queued ─► sent (txack) ─► acked
 *       │           │         └──────────► failed (nack, or the server gave up)
 *       │           ├─► flushed (the queue was emptied)
 *       │           └─► failed | expired
 *       ├─► refused (the network server said no; final)
 *       └─► pending (the server could not be reached; retried) ─► queued | refused
 *
 * Reads (`read`) and flushes end at `done` or `refused`; a broker message
 * (`publish`) at `published`.
 */
export type CommandStatus = 'requested' | 'pending' | 'queued' | 'done' | 'published' | 'sent' | 'acked' | 'failed' | 'expired' | 'flushed' | 'refused';

/** A downlink as every LoRaWAN integration takes it. */
export interface Downlink {
  fPort: number;
  /** The payload as hexadecimal, lower case. */
  hex: string;
  confirmed: boolean;
  /** A plain-text note of the sender's, kept with the item. */
  reference?: string;
}

export interface CommandRequest {
  id: string;
  /** The device the command is for; null for a connector command. */
  deviceId: string | null;
  connectorId: string;
  integration: IntegrationName;
  /** The command's name as sent (`loraAppServerQueueDownlink`, `apiCall`, `sendDownlink`). */
  command: string;
  kind: CommandKind;
  /** The device's DevEUI at the network server, when it has one. */
  devEui: string | null;
  /** The network server's own id of the device, where it has one (The Things Stack's `device_id`). */
  networkDeviceId: string | null;
  /** `queue`: the downlink; `publish`: the topic and message. */
  downlink?: Downlink;
  publish?: { topic: string; message: string };
  /** The command's data as sent, for the record. */
  data: Record<string, unknown>;
  at: string;
}

export type CommandEvent =
  | { type: 'CommandRequested'; data: CommandRequest }
  /** The integration took it: queued at the network server (with its own id for the item), read (with the items), flushed, or published. */
  | { type: 'CommandAccepted'; data: { id: string; networkItemId?: string; items?: Record<string, unknown>[]; at: string } }
  /** The network server answered no; final. */
  | { type: 'CommandRefused'; data: { id: string; status?: number; message: string; at: string } }
  /** The integration could not be reached, or failed; it is tried again at `retryAt`, or not when `final`. */
  | { type: 'CommandAttemptFailed'; data: { id: string; attempt: number; message: string; retryAt: string | null; at: string } }
  | { type: 'DownlinkSent'; data: { id: string; at: string; fCntDown?: number; gatewayId?: string } }
  | { type: 'DownlinkAcked'; data: { id: string; at: string } }
  | { type: 'DownlinkFailed'; data: { id: string; at: string; reason: string; expired?: boolean } }
  | { type: 'DownlinkFlushed'; data: { id: string; at: string; byCommand: string } };

export type CommandCommand =
  | { type: 'RequestCommand'; request: CommandRequest }
  | { type: 'RecordOutcome'; event: Exclude<CommandEvent, { type: 'CommandRequested' }> };

export type CommandState = { status: 'none' } | { status: CommandStatus; request: CommandRequest; attempts: number };

export const commandStream = (id: string) => `command-${id}`;
export const COMMAND_NOT_FOUND = 'Command not found';

/** The longest payload a LoRaWAN downlink carries (DR with the largest frame, 242 bytes). */
export const MAX_DOWNLINK_BYTES = 242;

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `fPort` as the spec sends it (a string) or as a number: 1 to 223, the application ports. */
export function checkFPort(value: unknown, field: string): number {
  const n = typeof value === 'string' && /^\d{1,3}$/.test(value) ? Number(value) : value;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 223) throw ValidationError.field(field, 'must be a LoRaWAN application port, 1 to 223 (a number or a string of digits)');
  return n;
}

export function checkHex(value: unknown, field: string): string {
  if (typeof value !== 'string' || !/^(?:[0-9a-fA-F]{2})*$/.test(value)) throw ValidationError.field(field, 'must be hexadecimal, two digits per byte');
  if (value.length / 2 > MAX_DOWNLINK_BYTES) throw ValidationError.field(field, `must be at most ${MAX_DOWNLINK_BYTES} bytes`);
  return value.toLowerCase();
}

/** A payload the device's translator encoded from the command's `object`: its bytes as hex, and the port its codec chose. */
export interface EncodedPayload {
  hex: string;
  fPort: number;
}

/**
 * The downlink a queue command carries, in either of the spec's forms:
 * `{confirmed, reference, fPort, data: hex}` or the generic
 * `{callName: sendDownlink, callData: {devEui, payload: {fPort, payloadHex}}}`.
 * An already encoded payload (`encoded`, from the device's translator) takes
 * the place of the hex, and its port that of the one asked for.
 */
export function downlinkOf(command: string, data: Record<string, unknown>, encoded?: EncodedPayload): Downlink {
  if (command === API_CALL) {
    const callData = isRecord(data.callData) ? data.callData : {};
    const payload = isRecord(callData.payload) ? callData.payload : {};
    return encoded
      ? { fPort: checkFPort(encoded.fPort, 'data.callData.payload.object'), hex: checkHex(encoded.hex, 'data.callData.payload.object'), confirmed: payload.confirmed === true }
      : { fPort: checkFPort(payload.fPort, 'data.callData.payload.fPort'), hex: checkHex(payload.payloadHex, 'data.callData.payload.payloadHex'), confirmed: payload.confirmed === true };
  }
  const downlink: Downlink = encoded
    ? { fPort: checkFPort(encoded.fPort, 'data.object'), hex: checkHex(encoded.hex, 'data.object'), confirmed: data.confirmed === true }
    : { fPort: checkFPort(data.fPort, 'data.fPort'), hex: checkHex(data.data, 'data.data'), confirmed: data.confirmed === true };
  if (typeof data.reference === 'string') downlink.reference = data.reference;
  return downlink;
}

/**
 * The DevEUI a generic call names (lower case), or null: checked against the
 * device's own when it has one; the address of the call when it has none.
 */
export function checkCallDevEui(data: Record<string, unknown>, devEui: string | null): string | null {
  const callData = isRecord(data.callData) ? data.callData : {};
  if (callData.devEui === undefined) return null;
  if (typeof callData.devEui !== 'string' || !DEV_EUI.test(callData.devEui)) throw ValidationError.field('data.callData.devEui', 'must be 16 hexadecimal digits');
  const named = normalizeDevEui(callData.devEui);
  if (devEui !== null && named !== devEui) throw ValidationError.field('data.callData.devEui', "must be the iotnode's own devEui");
  return named;
}

/** The request a command becomes: its kind, its downlink or message, checked. */
export function requestOf(input: Omit<CommandRequest, 'kind' | 'downlink' | 'publish'>, extra: { encoded?: EncodedPayload; publishTopic?: string } = {}): CommandRequest {
  const spec = COMMANDS[input.integration][input.command];
  if (!spec) {
    const known = Object.keys(COMMANDS[input.integration]);
    throw ValidationError.field('command', `is not a command of the ${input.integration} integration; ${known.length ? `it takes ${known.join(', ')}` : 'it takes no commands'}`);
  }
  const kind = kindOf(spec, input.data);
  const unavailable = UNAVAILABLE[input.integration]?.[kind];
  if (unavailable) {
    const call = input.command === API_CALL;
    throw ValidationError.field(call ? 'data.callName' : 'command', `${call ? String(input.data.callName) : input.command} is not available with the ${input.integration} integration: ${unavailable}`);
  }
  // A generic call names the device's DevEUI: a device that has none stored is addressed by it.
  const generic = input.command === API_CALL;
  const named = generic ? checkCallDevEui(input.data, input.devEui) : null;
  const request: CommandRequest = { ...input, devEui: input.devEui ?? named, kind };
  if (kind === 'queue') request.downlink = downlinkOf(input.command, input.data, extra.encoded);
  if (kind === 'publish') {
    if (!extra.publishTopic) throw ValidationError.field('connectorId', 'has no topic to publish to');
    request.publish = { topic: extra.publishTopic, message: String(input.data.message ?? '') };
  }
  if ((kind === 'queue' || kind === 'read' || kind === 'flush') && request.devEui === null && request.networkDeviceId === null) {
    throw ValidationError.field('iotnodeId', `names an iotnode without a devEui; set its devEui (16 hexadecimal digits)${generic ? ' or give data.callData.devEui' : ''} to send ${input.integration} commands`);
  }
  return request;
}

/** What each outcome makes of the command's status; null when it does not apply in that status (a late or repeated event). */
function next(state: Exclude<CommandState, { status: 'none' }>, event: Exclude<CommandEvent, { type: 'CommandRequested' }>): CommandStatus | null {
  const open = state.status === 'requested' || state.status === 'pending';
  switch (event.type) {
    case 'CommandAccepted':
      if (!open) return null;
      return state.request.kind === 'queue' ? 'queued' : state.request.kind === 'publish' ? 'published' : 'done';
    case 'CommandRefused':
      return open ? 'refused' : null;
    case 'CommandAttemptFailed':
      if (!open) return null;
      return event.data.retryAt === null ? 'failed' : 'pending';
    case 'DownlinkSent':
      return state.status === 'queued' ? 'sent' : null;
    case 'DownlinkAcked':
      return state.status === 'queued' || state.status === 'sent' ? 'acked' : null;
    case 'DownlinkFailed':
      return state.status === 'queued' || state.status === 'sent' ? (event.data.expired ? 'expired' : 'failed') : null;
    case 'DownlinkFlushed':
      return state.status === 'queued' ? 'flushed' : null;
    default: {
      const _: never = event;
      return _;
    }
  }
}

export const commandDecider: Decider<CommandCommand, CommandState, CommandEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'RequestCommand':
        if (state.status !== 'none') throw new ConflictError(`Command ${command.request.id} already exists`);
        return [{ type: 'CommandRequested', data: command.request }];
      case 'RecordOutcome': {
        if (state.status === 'none') throw new NotFoundError(COMMAND_NOT_FOUND);
        // Network servers repeat and reorder their events: one that no longer applies changes nothing.
        return next(state, command.event) === null ? [] : [command.event];
      }
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    if (event.type === 'CommandRequested') return { status: 'requested', request: event.data, attempts: 0 };
    if (state.status === 'none') return state;
    const status = next(state, event);
    const attempts = event.type === 'CommandAttemptFailed' ? event.data.attempt : state.attempts;
    return status === null ? state : { ...state, status, attempts };
  },
};

/** A device command as `PUT /api/iotnodes/command` takes it (and a rule's command action holds it). */
export interface DeviceCommandInput {
  command: string;
  iotnodeId: string;
  integrationName?: string;
  /** The connector to send through, when the iotnode's own is not the one (several of `integrationName` to choose from). */
  connectorId?: string;
  data?: Record<string, unknown>;
}

/** A command requested through the one path of device commands (`api/commands/send.ts`). */
export interface SentCommand {
  id: string;
  integration: IntegrationName;
  request: CommandRequest;
  handled: Handled<CommandState, CommandEvent>;
}
