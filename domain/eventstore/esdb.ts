import {
  ANY,
  EventStoreDBClient,
  NO_STREAM,
  START,
  STREAM_EXISTS,
  StreamNotFoundError,
  WrongExpectedVersionError,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type AppendExpectedRevision,
  type JSONType,
  type ReadPosition,
  type RecordedEvent as EsdbRecordedEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import { ConcurrencyError } from '../shared/errors.js';
import { comparePositions, type EventMetadata, type NewEvent, type Position, type RecordedEvent } from '../shared/events.js';
import type { AppendResult, EventStore, ExpectedRevision, ReadAllOptions, SubscribeOptions, Subscription } from './port.js';

/**
 * The EventStoreDB event store (22.6 or later, which reports positions on
 * stream reads), chosen when `EVENTSTORE_URL` is set.
 *
 * Idempotency: the server guarantees it only for appends with a specific
 * expected revision (`no_stream` or a number), which is what the write path
 * uses. For those, a retry is recognised by the stored ids at the revisions the
 * original append took. For `any` and `exists` the server only does its best,
 * so the adapter looks for the ids in the stream first; that reads the whole
 * stream, a cost paid only in those two modes.
 *
 * System events (`$`-prefixed types or streams) never leave the adapter.
 */
export function createEsdbStore(url: string): EventStore {
  const client = EventStoreDBClient.connectionString(url);

  async function append(streamId: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    if (expected === 'any' || expected === 'exists') {
      const found = await findStored(streamId, events, 0);
      if (found === 'partly') throw await conflict(streamId, expected);
      if (found !== 'none') return found;
    }
    let result;
    try {
      result = await client.appendToStream(streamId, events.map(toEventData), { expectedRevision: toEsdbExpected(expected) });
    } catch (error) {
      if (!(error instanceof WrongExpectedVersionError)) throw error;
      const found = await findStored(streamId, events, retryFrom(expected));
      if (typeof found === 'object') return found;
      throw new ConcurrencyError(streamId, String(expected), String(error.actualVersion));
    }
    if (!result.success) {
      // Only when the connection string sets throwOnAppendFailure=false.
      const found = await findStored(streamId, events, retryFrom(expected));
      if (typeof found === 'object') return found;
      throw await conflict(streamId, expected);
    }
    // The write's own position need not be the last event's position in $all, and an
    // idempotent success carries none, so read back the events the append answered with.
    const last = Number(result.nextExpectedRevision);
    const first = last - events.length + 1;
    const stored = first >= 0 ? await readStream(streamId, { fromRevision: first, limit: events.length }) : [];
    if (stored.length === events.length && stored.every((e, i) => e.id === events[i]!.id)) {
      return { nextRevision: last, position: stored[stored.length - 1]!.position };
    }
    const found = await findStored(streamId, events, retryFrom(expected));
    if (typeof found === 'object') return found;
    throw new Error(`EventStoreDB acknowledged an append to ${streamId} whose events cannot be read back`);
  }

  /**
   * Whether every event id is already in the stream (then the answer the original
   * append gave), some of them, or none. Reads from `fromRevision` on.
   */
  async function findStored(streamId: string, events: NewEvent[], fromRevision: number): Promise<AppendResult | 'partly' | 'none'> {
    const wanted = new Set(events.map((e) => e.id));
    let last: RecordedEvent | null = null;
    let seen = 0;
    for (const e of await readStream(streamId, { fromRevision })) {
      if (!wanted.has(e.id)) continue;
      seen++;
      if (!last || e.revision > last.revision) last = e;
    }
    if (seen === 0 || !last) return 'none';
    if (seen < wanted.size) return 'partly';
    return { nextRevision: last.revision, position: last.position };
  }

  async function conflict(streamId: string, expected: ExpectedRevision): Promise<ConcurrencyError> {
    const tail = await lastRevision(streamId);
    return new ConcurrencyError(streamId, String(expected), tail === null ? 'no_stream' : String(tail));
  }

  async function lastRevision(streamId: string): Promise<number | null> {
    try {
      for await (const resolved of client.readStream(streamId, { direction: 'backwards', fromRevision: 'end', maxCount: 1 })) {
        if (resolved.event) return Number(resolved.event.revision);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return null;
      throw error;
    }
    return null;
  }

  async function readStream(streamId: string, opts: { fromRevision?: number; limit?: number } = {}): Promise<RecordedEvent[]> {
    if (opts.limit === 0) return [];
    const out: RecordedEvent[] = [];
    try {
      const read = client.readStream(streamId, {
        fromRevision: BigInt(opts.fromRevision ?? 0),
        ...(opts.limit !== undefined ? { maxCount: opts.limit } : {}),
      });
      for await (const resolved of read) {
        const e = toRecorded(resolved.event);
        if (e) out.push(e);
      }
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
    return out;
  }

  async function readAll({ after, limit }: ReadAllOptions): Promise<RecordedEvent[]> {
    const out: RecordedEvent[] = [];
    // `fromPosition` is inclusive and $all holds system events, so read pages and drop both.
    let from: ReadPosition = after ?? START;
    let floor: Position | null = after ?? null;
    while (out.length < limit) {
      const want = limit - out.length + 1;
      let count = 0;
      let lastSeen: Position | null = null;
      const read: StreamingRead<AllStreamResolvedEvent> = client.readAll({ fromPosition: from, maxCount: want });
      for await (const resolved of read) {
        count++;
        const raw: AllStreamResolvedEvent['event'] = resolved.event;
        if (!raw) continue;
        lastSeen = raw.position;
        if (floor && comparePositions(raw.position, floor) <= 0) continue;
        const e = toRecorded(raw);
        if (e && out.length < limit) out.push(e);
      }
      if (count < want || !lastSeen) break;
      from = lastSeen;
      floor = lastSeen;
    }
    return out;
  }

  function subscribe(options: SubscribeOptions, handler: (batch: RecordedEvent[]) => Promise<void>): Subscription {
    const batchSize = options.batchSize ?? 500;
    let position: Position | null = options.after ?? null;
    let stopped = false;
    let current: AllStreamSubscription | null = null;
    let pause: { timer: NodeJS.Timeout; resolve: () => void } | null = null;

    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        // Stopped while unsubscribing after a failure: `stop` found no pause to cut short.
        if (stopped) return resolve();
        pause = { timer: setTimeout(() => resolve(), ms), resolve };
      });

    const loop = (async () => {
      while (!stopped) {
        try {
          const sub: AllStreamSubscription = client.subscribeToAll({ fromPosition: position ?? START, filter: excludeSystemEvents() }, { highWaterMark: batchSize });
          current = sub;
          let batch: RecordedEvent[] = [];
          for await (const resolved of sub) {
            if (stopped) break;
            const raw: AllStreamResolvedEvent['event'] = resolved.event;
            // Subscription positions are exclusive; the check keeps that true whatever the server does.
            const e = raw && (!position || comparePositions(raw.position, position) > 0) ? toRecorded(raw) : null;
            if (e) batch.push(e);
            if (batch.length > 0 && (batch.length >= batchSize || sub.readableLength === 0)) {
              await handler(batch);
              position = batch[batch.length - 1]!.position;
              batch = [];
            }
          }
          if (!stopped) throw new Error('the EventStoreDB subscription ended');
        } catch (error) {
          if (stopped) break;
          options.onError?.(error);
          await current?.unsubscribe().catch(() => {});
          current = null;
          // Resubscribing from the last handled position offers a failed batch again.
          await sleep(1000);
        }
      }
    })();

    return {
      async stop() {
        stopped = true;
        if (pause) {
          clearTimeout(pause.timer);
          pause.resolve();
        }
        const sub = current;
        if (sub) {
          await sub.unsubscribe().catch(() => {});
          sub.destroy();
        }
        await loop;
      },
    };
  }

  return { kind: 'eventstoredb', append, readStream, readAll, subscribe, close: () => client.dispose() };
}

function toEsdbExpected(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'any':
      return ANY;
    case 'no_stream':
      return NO_STREAM;
    case 'exists':
      return STREAM_EXISTS;
    default:
      return BigInt(expected);
  }
}

/** Where the events of an earlier append with the same expectation would be. */
const retryFrom = (expected: ExpectedRevision): number =>
  expected === 'no_stream' ? 0 : typeof expected === 'number' ? expected + 1 : 0;

/**
 * `$correlationId` and `$causationId` are the names EventStoreDB's own
 * projections read; the platform's names are kept as they are.
 */
function toEventData(e: NewEvent) {
  const metadata: Record<string, unknown> = { ...e.metadata, $correlationId: e.metadata.correlationId };
  if (e.metadata.causationId) metadata.$causationId = e.metadata.causationId;
  return jsonEvent({ id: e.id, type: e.type, data: e.data as JSONType, metadata });
}

function toRecorded(raw: EsdbRecordedEvent | undefined): RecordedEvent | null {
  if (!raw || raw.type.startsWith('$') || raw.streamId.startsWith('$')) return null;
  if (!raw.position) throw new Error('EventStoreDB did not report event positions; the platform needs EventStoreDB 22.6 or later');
  const { $correlationId: _c, $causationId: _d, ...metadata } = (raw.metadata ?? {}) as Record<string, unknown>;
  return {
    id: raw.id,
    type: raw.type,
    data: raw.data,
    metadata: metadata as unknown as EventMetadata,
    streamId: raw.streamId,
    revision: Number(raw.revision),
    position: { commit: raw.position.commit, prepare: raw.position.prepare },
  };
}
