import type { NewEvent, Position, RecordedEvent } from '../shared/events.js';

/** `no_stream`: the stream must not exist; `exists`: it must; a number: its last event's revision. */
export type ExpectedRevision = 'any' | 'no_stream' | 'exists' | number;

export interface AppendResult {
  /** The revision of the stream's last event after the append. */
  nextRevision: number;
  /** The global position of the last appended event. */
  position: Position;
}

export interface ReadAllOptions {
  /** Read events strictly after this position; from the beginning when absent. */
  after?: Position | null;
  limit: number;
}

/**
 * Which events an audit read wants; every given criterion must hold. Times
 * compare the events' `metadata.time`: `from` inclusive, `to` exclusive.
 */
export interface EventFilter {
  /** Events of any of these streams; an empty list matches nothing. */
  streamIds?: string[];
  /** Events of any of these types. */
  types?: string[];
  actor?: string;
  correlationId?: string;
  from?: string;
  to?: string;
}

export interface Subscription {
  /** Stops reading; resolves once the handler in progress, if any, has returned. */
  stop(): Promise<void>;
}

export interface SubscribeOptions {
  after?: Position | null;
  batchSize?: number;
  /** Called when reading or the handler fails; the subscription retries the same batch after a pause. */
  onError?: (error: unknown) => void;
}

/**
 * The event store port. Two adapters implement it: PostgreSQL (the default,
 * `postgres.ts`) and EventStoreDB (`esdb.ts`). Both pass `test/eventstore/contract.ts`.
 */
export interface EventStore {
  readonly kind: 'postgres' | 'eventstoredb';
  /**
   * Appends atomically. Throws `ConcurrencyError` when the stream is not at
   * `expected`. Appending events whose ids are all already stored in the
   * stream is a no-op that answers as the original append did, even after the
   * stream moved on, whatever the expectation (`no_stream`, `exists`, `any` or
   * a revision).
   *
   * An event id belongs to one stream. Appending an id already stored in a
   * different stream is refused with `ConcurrencyError` and nothing of the
   * append is stored: the PostgreSQL adapter keeps ids unique across the whole
   * store. EventStoreDB recognises a repeated id only within one stream, so
   * its adapter stores such an event again in the other stream; writers never
   * reuse an id across streams (each decision's events get fresh UUIDs), so
   * this only matters to a caller that breaks that rule.
   */
  append(streamId: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult>;
  /**
   * Appends to several distinct streams, each at whatever revision it has,
   * atomically and in one round trip: the batching path of ingest. Events keep
   * the given order in the global order. Throws if any event id is already
   * stored (nothing is appended then); the caller falls back to `append`.
   * Answers the global position of the last event appended (null when every
   * append was empty), for a caller that waits for the read models to hold it.
   * Adapters without an atomic multi-stream append leave it out.
   */
  appendMany?(appends: { streamId: string; events: NewEvent[] }[]): Promise<Position | null>;
  /** The stream's events in revision order; empty when the stream does not exist. */
  readStream(streamId: string, options?: { fromRevision?: number; limit?: number }): Promise<RecordedEvent[]>;
  /**
   * The events of several distinct streams in one round trip: each stream's events in
   * revision order, the streams in the order given; a stream that does not
   * exist adds nothing. Adapters without such a read leave it out; callers
   * then read stream by stream.
   */
  readStreams?(streamIds: string[]): Promise<RecordedEvent[]>;
  /** Events in global order. Never returns an event that could be followed by one committed later at a lower position. */
  readAll(options: ReadAllOptions): Promise<RecordedEvent[]>;
  /**
   * How many events `readAll` would return after `after`, counted up to `cap`:
   * how far a subscriber at `after` is behind. Adapters that cannot count
   * without reading the events leave it out.
   */
  countAfter?(after: Position | null, cap: number): Promise<number>;
  /**
   * Events that match `filter`, in global order, strictly after `after`, at
   * most `limit`: the audit log's reads, served by the store's own indexes.
   * Adapters without such indexes leave it out; `readMatching` then scans
   * `readAll`.
   */
  readFiltered?(filter: EventFilter, options: ReadAllOptions): Promise<RecordedEvent[]>;
  /** Catches up from `after`, then follows live. The handler gets batches in global order and is awaited. */
  subscribe(options: SubscribeOptions, handler: (batch: RecordedEvent[]) => Promise<void>): Subscription;
  close(): Promise<void>;
}
