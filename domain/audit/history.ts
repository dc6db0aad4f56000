import type { RecordedEvent } from '../shared/events.js';
import type { EventStore } from '../eventstore/port.js';
import { diff, type Change } from './diff.js';

/** One change to a resource: which event, who, when, which request, and what it changed. */
export interface Revision {
  time: string;
  actor: string;
  correlationId: string;
  type: string;
  revision: number;
  changes: Change[];
}

/** A fold: the state a resource's events build, and how a client sees it (undefined while it does not exist). */
export interface Fold<S> {
  initial: () => S;
  evolve: (state: S, event: RecordedEvent) => S;
  view: (state: S) => unknown;
}

/** Events read per round trip when folding a stream. */
const PAGE = 5000;

/**
 * A fold gives the event loop back this often: a device's years of reports, each folded into a wide document,
 * take seconds, and every other request, message and tenant would wait for all of them at once.
 */
const SLICE_MS = 10;

/** Null while the slice that began at `since` lasts; once it is used up, a pause until the event loop's other work has run. */
function pause(since: { at: number }): Promise<void> | null {
  if (performance.now() - since.at < SLICE_MS) return null;
  return new Promise<void>((resolve) => setImmediate(resolve)).then(() => void (since.at = performance.now()));
}

/**
 * The state of a stream at `at`: its events folded in order, up to the first
 * one stamped after `at` (events of one stream are stamped in the order they
 * are appended, so that prefix is a state the resource really had), from the
 * beginning or from a snapshot.
 */
export async function stateAt<S>(
  store: EventStore,
  streamId: string,
  fold: Pick<Fold<S>, 'initial' | 'evolve'>,
  at: string,
  /** A snapshot to start from: the state after the event at `revision`, itself stamped by `at`. */
  from?: { state: S; revision: number },
): Promise<{ state: S; revision: number }> {
  let state = from ? from.state : fold.initial();
  let revision = from ? from.revision : -1;
  const slice = { at: performance.now() };
  for (;;) {
    const events = await store.readStream(streamId, { fromRevision: revision + 1, limit: PAGE });
    for (const event of events) {
      if (event.metadata.time > at) return { state, revision };
      state = fold.evolve(state, event);
      revision = event.revision;
      const paused = pause(slice);
      if (paused) await paused;
    }
    if (events.length < PAGE) return { state, revision };
  }
}

/** A stream's events in order, read a page at a time. */
export async function* streamEvents(store: EventStore, streamId: string): AsyncGenerator<RecordedEvent> {
  let from = 0;
  for (;;) {
    const events = await store.readStream(streamId, { fromRevision: from, limit: PAGE });
    yield* events;
    if (events.length < PAGE) return;
    from = events[events.length - 1]!.revision + 1;
  }
}

/**
 * The revisions a resource's events (in order) made: each event that `shown`
 * keeps becomes one revision, its changes the difference in the resource's
 * view before and after it. Events left out still fold, so a revision's
 * changes are its own.
 */
export async function revisions<S>(events: Iterable<RecordedEvent> | AsyncIterable<RecordedEvent>, fold: Fold<S>, shown: (e: RecordedEvent) => boolean = () => true): Promise<Revision[]> {
  const out: Revision[] = [];
  let state = fold.initial();
  const slice = { at: performance.now() };
  for await (const event of events) {
    const next = fold.evolve(state, event);
    if (shown(event)) {
      const { time, actor, correlationId } = event.metadata;
      out.push({ time, actor, correlationId, type: event.type, revision: event.revision, changes: diff(fold.view(state), fold.view(next)) });
    }
    state = next;
    const paused = pause(slice);
    if (paused) await paused;
  }
  return out;
}
