/**
 * Events as the store sees them. Domain events are `{type, data}`; the write path
 * wraps them with an id and metadata before they are appended.
 */
export interface EventMetadata {
  /** A user id, a credentials set id (`credentials:<id>`), or a component (`system:<name>`). */
  actor: string;
  /** The HTTP request id or the MQTT message id that caused this event. */
  correlationId: string;
  /** The id of the event that caused this one, when an event caused it. */
  causationId?: string;
  /** ISO 8601. */
  time: string;
  /**
   * The version of the data's shape (`domain/eventstore/schemas.ts`): stamped
   * at append; absent on events stored before versions were recorded, which
   * are version 1. Events read through the store are upcast to the current one.
   */
  schemaVersion?: number;
}

export interface DomainEvent<T extends string = string, D = unknown> {
  type: T;
  data: D;
}

export interface NewEvent extends DomainEvent {
  /** A UUID; appending an id that is already stored is a no-op. */
  id: string;
  metadata: EventMetadata;
}

/**
 * A place in the store's global order. For PostgreSQL, `commit` is the
 * writing transaction's id and `prepare` the event's sequence; for EventStoreDB,
 * its commit and prepare log positions. Ordered by (commit, prepare).
 */
export interface Position {
  commit: bigint;
  prepare: bigint;
}

export interface RecordedEvent<T extends string = string, D = unknown> extends DomainEvent<T, D> {
  id: string;
  metadata: EventMetadata;
  streamId: string;
  /** 0 for a stream's first event. */
  revision: number;
  position: Position;
}

export const comparePositions = (a: Position, b: Position): number =>
  a.commit < b.commit ? -1 : a.commit > b.commit ? 1 : a.prepare < b.prepare ? -1 : a.prepare > b.prepare ? 1 : 0;

export const positionToString = (p: Position): string => `${p.commit}/${p.prepare}`;
