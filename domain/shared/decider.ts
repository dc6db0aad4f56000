import type { DomainEvent, EventMetadata, NewEvent } from './events.js';
import { ConcurrencyError } from './errors.js';
import { newEventId } from './ids.js';
import type { AppendResult, EventStore, ExpectedRevision } from '../eventstore/port.js';

/**
 * A pure decider: `decide` turns a command and the current state into events,
 * `evolve` folds an event into the state. Time and ids arrive inside the command,
 * so both are deterministic and tested without a clock.
 */
export interface Decider<C, S, E extends DomainEvent> {
  initialState: () => S;
  decide(command: C, state: S): E[];
  evolve(state: S, event: E): S;
}

export interface CommandContext {
  actor: string;
  correlationId: string;
  causationId?: string;
  /** ISO 8601; also the `time` of the events. */
  now: string;
}

export interface Handled<S, E> {
  events: E[];
  state: S;
  /** Undefined when the decision produced no event. */
  result?: AppendResult;
}

export interface HandleOptions<S = unknown> {
  /**
   * The stream's state as of a revision, as the caller already holds it (a
   * read model's row): only the events after that revision are read and
   * folded. For streams too long to fold on every command.
   */
  from?: { state: S; revision: number } | null;
  /** Re-read and decide again this many times when another writer got in first; for commands that commute. */
  retries?: number;
  /** The revision the caller saw (from `If-Match`); a mismatch is a `ConcurrencyError` without retry. */
  expectedRevision?: number;
  /** Ids for the decided events, in order, instead of fresh ones: derived from what caused them, so a repeat is a no-op in the store. */
  eventIds?: string[];
}

/**
 * Loads a stream, folds it, decides, and appends with the revision it read,
 * so a concurrent writer surfaces as `ConcurrencyError` instead of a lost update.
 */
export async function handle<C, S, E extends DomainEvent>(
  store: EventStore,
  streamId: string,
  decider: Decider<C, S, E>,
  command: C,
  context: CommandContext,
  options: HandleOptions<S> = {},
): Promise<Handled<S, E>> {
  const from = options.from ?? null;
  for (let attempt = 0; ; attempt++) {
    const stored = await store.readStream(streamId, from ? { fromRevision: from.revision + 1 } : undefined);
    const revision = stored.length ? stored[stored.length - 1]!.revision : (from?.revision ?? -1);
    if (options.expectedRevision !== undefined && options.expectedRevision !== revision) {
      throw new ConcurrencyError(streamId, String(options.expectedRevision), String(revision));
    }
    let state = from ? from.state : decider.initialState();
    for (const e of stored) state = decider.evolve(state, e as unknown as E);
    const events = decider.decide(command, state);
    if (events.length === 0) return { events, state };
    for (const e of events) state = decider.evolve(state, e);
    const expected: ExpectedRevision = revision === -1 ? 'no_stream' : revision;
    try {
      const result = await store.append(streamId, events.map((e, i) => toNewEvent(e, context, options.eventIds?.[i])), expected);
      return { events, state, result };
    } catch (error) {
      if (error instanceof ConcurrencyError && attempt < (options.retries ?? 0)) continue;
      throw error;
    }
  }
}

export function toNewEvent(event: DomainEvent, context: CommandContext, id: string = newEventId()): NewEvent {
  const metadata: EventMetadata = { actor: context.actor, correlationId: context.correlationId, time: context.now };
  if (context.causationId) metadata.causationId = context.causationId;
  return { id, type: event.type, data: event.data, metadata };
}
