import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';

/**
 * A reserved MQTT topic: only its paired credentials set may publish to it
 * and below it. The three vendor roots are fixed names of this build
 * (docs/mqtt.md).
 */
export const ALLOWED_ROOTS = ['svc/generic/v2', 'svc/push/v1', 'svc/tracker/v1', 'svc/meter/v1', 'svc/gateway/v1'] as const;

export type ReservedTopicEvent =
  | { type: 'ReservedTopicCreated'; data: { id: string; topic: string; basicCredentialsSetId: string; createdBy: string; at: string } }
  | { type: 'ReservedTopicDeleted'; data: { id: string; topic: string; at: string } };

export type ReservedTopicCommand =
  | { type: 'ReserveTopic'; id: string; topic: string; basicCredentialsSetId: string; createdBy: string; at: string }
  | { type: 'ReleaseTopic'; id: string; at: string };

export type ReservedTopicState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; topic: string };

export const reservedTopicStream = (id: string) => `reservedtopic-${id}`;
export const TOPIC_NOT_FOUND = 'Reserved MQTT topic not found';

/** What every refusal of a reservation says (also the document's `x-refusal-note` of the operation). */
export const ROOTS_NOTE = `the allowed roots are ${ALLOWED_ROOTS.join(', ')}, each followed by at least one sub-topic`;

/** The root of the downlink topics: `svc/push/v1/<basicCredentialsSetId>/…` belongs to that credentials set. */
export const PUSH_ROOT = 'svc/push/v1';

/**
 * The topic rules of the contract, plus the ones MQTT itself imposes on a
 * publish topic (no wildcards, no empty levels). Below `svc/push/v1` the first
 * level is a credentials set's id, so a set may only reserve its own branch
 * there: another set's push topic would let it write into that set's downlinks.
 */
export function checkTopic(topic: string, basicCredentialsSetId: string): void {
  const bad = (why: string) => ValidationError.field('topic', `${why}; ${ROOTS_NOTE}`);
  if (topic.startsWith('/')) throw bad('must not start with /');
  const root = ALLOWED_ROOTS.find((r) => topic === r || topic.startsWith(`${r}/`));
  if (!root) throw bad('must start with an allowed root');
  if (topic.length <= root.length + 1) throw bad('must add a sub-topic below the root');
  const levels = topic.slice(root.length + 1).split('/');
  if (levels.some((l) => l === '')) throw bad('must not have empty levels');
  if (/[+#\u0000]/.test(topic) || topic.includes('$')) throw bad('must not contain +, #, $ or NUL');
  if (Buffer.byteLength(topic) > 1024) throw bad('must be at most 1024 bytes');
  if (root === PUSH_ROOT && levels[0] !== basicCredentialsSetId) {
    throw ValidationError.field('topic', `below ${PUSH_ROOT} must start with the id of its own basic credentials set: ${PUSH_ROOT}/${basicCredentialsSetId}/…; ${ROOTS_NOTE}`);
  }
}

export const reservedTopicDecider: Decider<ReservedTopicCommand, ReservedTopicState, ReservedTopicEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'ReserveTopic': {
        if (state.status !== 'none') throw new ConflictError(`Reserved topic ${command.id} already exists`);
        checkTopic(command.topic, command.basicCredentialsSetId);
        const { id, topic, basicCredentialsSetId, createdBy, at } = command;
        return [{ type: 'ReservedTopicCreated', data: { id, topic, basicCredentialsSetId, createdBy, at } }];
      }
      case 'ReleaseTopic':
        if (state.status !== 'active') throw new NotFoundError(TOPIC_NOT_FOUND);
        return [{ type: 'ReservedTopicDeleted', data: { id: command.id, topic: state.topic, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'ReservedTopicCreated':
        return { status: 'active', id: event.data.id, topic: event.data.topic };
      case 'ReservedTopicDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
