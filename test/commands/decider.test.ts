import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COMMAND_NOT_FOUND, commandDecider, type CommandEvent, type CommandRequest, type CommandStatus } from '../../domain/commands/command.js';
import type { CommandKind } from '../../domain/integrations/catalog.js';
import { ConflictError, NotFoundError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const commands = suite('command decider');

const at = '2026-01-01T00:00:00.000Z';
const later = '2026-01-01T00:00:30.000Z';
const ID = '0b7c4a52-3f1e-4c36-9a8e-2d5f6b7c8d9e';
const FLUSH_ID = '1c8d5b63-4a2f-4d47-8b9f-3e6a7c8d9e0f';
const device = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const connector = 'bbbbbbbbbbbbbbbbbbbbbbbb';

const lora = { id: ID, deviceId: device, connectorId: connector, integration: 'ChirpStack', devEui: '0011223344556677', networkDeviceId: null, at } as const;
const requests: Record<CommandKind, CommandRequest> = {
  queue: { ...lora, command: 'loraAppServerQueueDownlink', kind: 'queue', downlink: { fPort: 10, hex: '01ff', confirmed: true }, data: { fPort: 10, data: '01FF', confirmed: true } },
  read: { ...lora, command: 'loraAppServerGetDeviceQueue', kind: 'read', data: {} },
  flush: { ...lora, command: 'loraAppServerFlushQueue', kind: 'flush', data: {} },
  publish: {
    id: ID,
    deviceId: null,
    connectorId: connector,
    integration: 'Generic',
    command: 'sendDownlink',
    kind: 'publish',
    devEui: null,
    networkDeviceId: null,
    publish: { topic: 'plant/valves/3', message: 'open' },
    data: { mqttTopic: 'valves/3', message: 'open' },
    at,
  },
};
const requested = (kind: CommandKind): CommandEvent => ({ type: 'CommandRequested', data: requests[kind] });

type Outcome = Exclude<CommandEvent, { type: 'CommandRequested' }>;
const accepted: Outcome = { type: 'CommandAccepted', data: { id: ID, networkItemId: 'item-1', at: later } };
const refused: Outcome = { type: 'CommandRefused', data: { id: ID, status: 404, message: 'object does not exist', at: later } };
const retrying: Outcome = { type: 'CommandAttemptFailed', data: { id: ID, attempt: 1, message: 'connect ECONNREFUSED', retryAt: '2026-01-01T00:01:00.000Z', at: later } };
const retryingAgain: Outcome = { type: 'CommandAttemptFailed', data: { id: ID, attempt: 2, message: 'connect ECONNREFUSED', retryAt: '2026-01-01T00:02:00.000Z', at: later } };
const givenUp: Outcome = { type: 'CommandAttemptFailed', data: { id: ID, attempt: 1, message: 'connect ECONNREFUSED', retryAt: null, at: later } };
const sent: Outcome = { type: 'DownlinkSent', data: { id: ID, at: later, fCntDown: 7, gatewayId: '0102030405060708' } };
const acked: Outcome = { type: 'DownlinkAcked', data: { id: ID, at: later } };
const nacked: Outcome = { type: 'DownlinkFailed', data: { id: ID, at: later, reason: 'not acknowledged' } };
const expired: Outcome = { type: 'DownlinkFailed', data: { id: ID, at: later, reason: 'expired before the device could receive it', expired: true } };
const flushed: Outcome = { type: 'DownlinkFlushed', data: { id: ID, at: later, byCommand: FLUSH_ID } };

/** A stream that brings a command to each status, the way a downlink's life does. */
const histories: [label: string, status: CommandStatus, events: CommandEvent[]][] = [
  ['requested', 'requested', [requested('queue')]],
  ['pending', 'pending', [requested('queue'), retrying]],
  ['queued', 'queued', [requested('queue'), accepted]],
  ['done', 'done', [requested('read'), accepted]],
  ['published', 'published', [requested('publish'), accepted]],
  ['sent', 'sent', [requested('queue'), accepted, sent]],
  ['acked', 'acked', [requested('queue'), accepted, sent, acked]],
  ['failed (not acknowledged)', 'failed', [requested('queue'), accepted, sent, nacked]],
  ['failed (given up)', 'failed', [requested('queue'), retrying, givenUp]],
  ['expired', 'expired', [requested('queue'), accepted, expired]],
  ['flushed', 'flushed', [requested('queue'), accepted, flushed]],
  ['refused', 'refused', [requested('queue'), refused]],
];

const given = (events: CommandEvent[]) => deciderSpec(commandDecider).given(events);
const statusOf = (events: CommandEvent[]) => given(events).state.status;

/**
 * The whole row of the status machine for one outcome: in the statuses of
 * `moves` the outcome is decided and the command goes to the status named;
 * in every other status it decides nothing and, folded anyway, changes nothing.
 */
function row(outcome: Outcome, moves: Partial<Record<string, CommandStatus>>) {
  for (const [label, , events] of histories) {
    const to = moves[label];
    const spec = given(events).when({ type: 'RecordOutcome', event: outcome });
    try {
      if (to) {
        spec.then([outcome]);
        assert.is(statusOf([...events, outcome]), to);
      } else {
        spec.then([]);
        assert.equal(given([...events, outcome]).state, given(events).state);
      }
    } catch (error) {
      (error as Error).message = `${outcome.type} in ${label}: ${(error as Error).message}`;
      throw error;
    }
  }
}

commands('given no command, when it is requested, then CommandRequested carries the request as checked', () => {
  given([]).when({ type: 'RequestCommand', request: requests.queue }).then([requested('queue')]);
  assert.equal(given([requested('queue')]).state, { status: 'requested', request: requests.queue, attempts: 0 });
});

commands('given a command in any status, when it is requested again, then a conflict names it', () => {
  for (const [label, , events] of histories) {
    try {
      given(events).when({ type: 'RequestCommand', request: requests.read }).thenThrows(ConflictError, `Command ${ID} already exists`);
    } catch (error) {
      (error as Error).message = `${label}: ${(error as Error).message}`;
      throw error;
    }
  }
});

commands('given no command, when an outcome is recorded for it, then Command not found', () => {
  for (const outcome of [accepted, refused, retrying, sent, acked, nacked, flushed]) {
    given([]).when({ type: 'RecordOutcome', event: outcome }).thenThrows(NotFoundError, COMMAND_NOT_FOUND);
  }
  assert.is(COMMAND_NOT_FOUND, 'Command not found');
});

commands('given the events of a downlink, a read, a flush and a message, when folded, then each ends in the status the machine names', () => {
  for (const [label, status, events] of histories) assert.is(statusOf(events), status, label);
  assert.is(statusOf([requested('flush'), accepted]), 'done');
  assert.is(statusOf([requested('read'), refused]), 'refused');
  assert.is(statusOf([requested('publish'), retrying, accepted]), 'published');
});

commands('given a requested or pending command, when the integration accepts it, then a downlink is queued, a read or flush done, a message published', () => {
  for (const kind of ['queue', 'read', 'flush', 'publish'] as const) {
    const to = { queue: 'queued', read: 'done', flush: 'done', publish: 'published' }[kind];
    for (const events of [[requested(kind)], [requested(kind), retrying]]) {
      given(events).when({ type: 'RecordOutcome', event: accepted }).then([accepted]);
      assert.is(statusOf([...events, accepted]), to, kind);
    }
  }
});

commands('given a command in each status, when CommandAccepted arrives, then only a requested or pending one takes it; later it decides nothing', () => {
  row(accepted, { requested: 'queued', pending: 'queued' });
});

commands('given a command in each status, when CommandRefused arrives, then a requested or pending one is refused for good; later it decides nothing', () => {
  row(refused, { requested: 'refused', pending: 'refused' });
});

commands('given a command in each status, when an attempt fails with a retry time, then a requested or pending one is pending; later it decides nothing', () => {
  row(retryingAgain, { requested: 'pending', pending: 'pending' });
});

commands('given a command in each status, when an attempt fails with no retry time, then a requested or pending one has failed; later it decides nothing', () => {
  row(givenUp, { requested: 'failed', pending: 'failed' });
});

commands('given a command in each status, when DownlinkSent arrives, then only a queued downlink is sent; anywhere else it decides nothing', () => {
  row(sent, { queued: 'sent' });
});

commands('given a command in each status, when DownlinkAcked arrives, then a queued or sent downlink is acked (a txack may come late); anywhere else it decides nothing', () => {
  row(acked, { queued: 'acked', sent: 'acked' });
});

commands('given a command in each status, when DownlinkFailed arrives, then a queued or sent downlink has failed; anywhere else it decides nothing', () => {
  row(nacked, { queued: 'failed', sent: 'failed' });
});

commands('given a command in each status, when DownlinkFailed arrives as expired, then a queued or sent downlink has expired; anywhere else it decides nothing', () => {
  row(expired, { queued: 'expired', sent: 'expired' });
});

commands('given a command in each status, when DownlinkFlushed arrives, then only a downlink still queued is flushed; anywhere else it decides nothing', () => {
  row(flushed, { queued: 'flushed' });
});

commands('given a downlink, when the network server repeats and reorders its events, then each one that no longer applies decides nothing', () => {
  const history: CommandEvent[] = [requested('queue'), accepted, acked];
  for (const late of [accepted, sent, acked, nacked, flushed]) given(history).when({ type: 'RecordOutcome', event: late }).then([]);
  assert.is(statusOf([...history, sent, nacked]), 'acked');
});

commands('given failed attempts, when folded, then attempts counts the latest one, and acceptance keeps it', () => {
  const second = retryingAgain;
  given([requested('queue'), retrying]).when({ type: 'RecordOutcome', event: second }).then([second]);
  assert.equal(given([requested('queue'), retrying, second]).state, { status: 'pending', request: requests.queue, attempts: 2 });
  assert.equal(given([requested('queue'), retrying, second, accepted]).state, { status: 'queued', request: requests.queue, attempts: 2 });
  assert.equal(given([requested('queue'), accepted, retrying]).state, { status: 'queued', request: requests.queue, attempts: 0 }, 'a late attempt failure counts nothing');
});

commands.run();
