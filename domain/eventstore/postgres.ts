import { EventEmitter } from 'node:events';
import type pg from 'pg';
import { ConcurrencyError } from '../shared/errors.js';
import type { NewEvent, Position, RecordedEvent } from '../shared/events.js';
import { jsonbArray } from '../shared/jsonb.js';
import { RecentEvents } from './recent.js';
import type { AppendResult, EventFilter, EventStore, ExpectedRevision, ReadAllOptions, SubscribeOptions, Subscription } from './port.js';

/**
 * The PostgreSQL event store, in schema `es` of the platform's database
 * (migration `0001_eventstore`).
 *
 * Global order is (transaction id, sequence). A reader never reads past
 * `pg_snapshot_xmin(pg_current_snapshot())`, the oldest transaction still in
 * flight, so an event whose transaction commits late can never land behind a
 * subscriber's checkpoint. An append is one statement, so one round trip and
 * one commit.
 */
export function createPostgresStore(pool: Queryable, options: { pollMs?: number } = {}): EventStore {
  const pollMs = options.pollMs ?? 100;
  // Wakes local subscribers as soon as an append commits; polling covers other processes.
  const appended = new EventEmitter();
  appended.setMaxListeners(0);
  const recent = new RecentEvents((after, limit) => readAll({ after, limit }));

  async function append(streamId: string, events: NewEvent[], expected: ExpectedRevision): Promise<AppendResult> {
    if (events.length === 0) throw new Error('append needs at least one event');
    // One JSON document for the whole batch: a single parameter that the server parses once.
    const params: unknown[] = [streamId, events.length, JSON.stringify(events.map((e) => [e.id, e.type, e.data, e.metadata]))];
    const kind = expected === 'any' || expected === 'no_stream' || expected === 'exists' ? expected : 'revision';
    if (kind === 'revision') params.push(expected);
    let rows: { revision: Int8; tx: string; global_position: Int8 }[];
    try {
      // Named, so each connection parses and plans it once.
      rows = (await pool.query({ name: `es_append_${kind}`, text: APPEND[kind], values: params })).rows;
    } catch (error) {
      if (isUniqueViolation(error)) {
        const replay = await alreadyStored(streamId, events);
        if (replay) return replay;
        // A concurrent writer took the same revision between our claim and insert.
        throw await conflict(streamId, expected);
      }
      throw error;
    }
    if (rows.length === 0) {
      const replay = await alreadyStored(streamId, events);
      if (replay) return replay;
      throw await conflict(streamId, expected);
    }
    const last = rows[0]!;
    recent.appended(BigInt(last.tx));
    appended.emit('append');
    return { nextRevision: Number(last.revision), position: { commit: BigInt(last.tx), prepare: BigInt(last.global_position) } };
  }

  async function appendMany(appends: { streamId: string; events: NewEvent[] }[]): Promise<Position | null> {
    const streams = appends.filter((a) => a.events.length > 0);
    if (streams.length === 0) return null;
    // One statement, the batch as one JSON parameter: claim every stream's revisions, then insert the events in the given order.
    const events: { s: string; o: number; id: string; type: string; data: unknown; meta: unknown; p: number }[] = [];
    for (const a of streams) for (let i = 0; i < a.events.length; i++) {
      const e = a.events[i]!;
      events.push({ s: a.streamId, o: i + 1, id: e.id, type: e.type, data: e.data, meta: e.metadata, p: events.length });
    }
    const { rows } = await pool.query<{ tx: string; last: string }>({
      name: 'es_append_many',
      text: `WITH input AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS i(stream_id text, n bigint)),
       claim AS (
         INSERT INTO es.streams AS s (stream_id, revision) SELECT stream_id, n - 1 FROM input ORDER BY stream_id
         ON CONFLICT (stream_id) DO UPDATE SET revision = s.revision + EXCLUDED.revision + 1
         RETURNING s.stream_id, s.revision),
       inserted AS (
         INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
         SELECT e.s, c.revision - i.n + e.o, e.id, e.type, e.data, e.meta
         FROM jsonb_to_recordset($2::jsonb) AS e(s text, o bigint, id uuid, type text, data jsonb, meta jsonb, p bigint)
         JOIN claim c ON c.stream_id = e.s JOIN input i ON i.stream_id = e.s
         ORDER BY e.p
         RETURNING global_position)
       SELECT pg_current_xact_id()::text AS tx, (SELECT max(global_position) FROM inserted)::text AS last`,
      values: [JSON.stringify(streams.map((a) => ({ stream_id: a.streamId, n: a.events.length }))), jsonbArray(events)],
    });
    recent.appended(BigInt(rows[0]!.tx));
    appended.emit('append');
    return { commit: BigInt(rows[0]!.tx), prepare: BigInt(rows[0]!.last) };
  }

  /**
   * The append is a retry of one already stored when every event id is present
   * in the stream; it then gets the answer the original append got.
   */
  async function alreadyStored(streamId: string, events: NewEvent[]): Promise<AppendResult | null> {
    const { rows } = await pool.query<{ revision: Int8; tx: string; global_position: Int8 }>(
      `SELECT revision, transaction_id::text AS tx, global_position FROM es.events
       WHERE event_id = ANY($1::uuid[]) AND stream_id = $2 ORDER BY revision`,
      [events.map((e) => e.id), streamId],
    );
    if (rows.length !== new Set(events.map((e) => e.id)).size) return null;
    const last = rows[rows.length - 1]!;
    return { nextRevision: Number(last.revision), position: { commit: BigInt(last.tx), prepare: BigInt(last.global_position) } };
  }

  async function conflict(streamId: string, expected: ExpectedRevision): Promise<ConcurrencyError> {
    const { rows } = await pool.query<{ revision: Int8 }>('SELECT revision FROM es.streams WHERE stream_id = $1', [streamId]);
    return new ConcurrencyError(streamId, String(expected), rows[0] ? String(rows[0].revision) : 'no_stream');
  }

  async function readStream(streamId: string, opts: { fromRevision?: number; limit?: number } = {}): Promise<RecordedEvent[]> {
    const { rows } = await pool.query<EventRow>({
      name: 'es_read_stream',
      text: `SELECT ${COLUMNS} FROM es.events WHERE stream_id = $1 AND revision >= $2 ORDER BY revision LIMIT $3`,
      values: [streamId, opts.fromRevision ?? 0, opts.limit ?? null],
    });
    return rows.map(toRecorded);
  }

  async function readStreams(streamIds: string[]): Promise<RecordedEvent[]> {
    if (streamIds.length === 0) return [];
    // Each stream read on the stream index, as `readStream` does.
    const { rows } = await pool.query<EventRow>({
      name: 'es_read_streams',
      text: `SELECT e.* FROM unnest($1::text[]) WITH ORDINALITY AS s(id, n)
       CROSS JOIN LATERAL (SELECT ${COLUMNS} FROM es.events WHERE stream_id = s.id ORDER BY revision) AS e
       ORDER BY s.n, e.revision`,
      values: [streamIds],
    });
    return rows.map(toRecorded);
  }

  async function readAll({ after, limit }: ReadAllOptions): Promise<RecordedEvent[]> {
    const { rows } = await pool.query<EventRow>({
      name: 'es_read_all',
      text: `SELECT ${COLUMNS} FROM es.events
       WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
         AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
       ORDER BY transaction_id, global_position
       LIMIT $3`,
      values: [String(after?.commit ?? 0n), String(after?.prepare ?? 0n), limit],
    });
    return rows.map(toRecorded);
  }

  async function countAfter(after: Position | null, cap: number): Promise<number> {
    // The range readAll would read, on the same index, without the rows' data.
    const { rows } = await pool.query<{ n: Int8 }>({
      name: 'es_count_after',
      text: `SELECT count(*) AS n FROM (SELECT 1 FROM es.events
         WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
           AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         LIMIT $3) AS behind`,
      values: [String(after?.commit ?? 0n), String(after?.prepare ?? 0n), cap],
    });
    return Number(rows[0]!.n);
  }

  async function readFiltered(filter: EventFilter, { after, limit }: ReadAllOptions): Promise<RecordedEvent[]> {
    const values: unknown[] = [String(after?.commit ?? 0n), String(after?.prepare ?? 0n), limit];
    const where: string[] = [];
    const param = (value: unknown) => `$${values.push(value)}`;
    // Only the criteria given, so the planner picks the index that fits (stream, correlation id, actor, or the global order).
    if (filter.streamIds) where.push(`stream_id = ANY(${param(filter.streamIds)}::text[])`);
    if (filter.types) where.push(`type = ANY(${param(filter.types)}::text[])`);
    if (filter.actor !== undefined) where.push(`metadata->>'actor' = ${param(filter.actor)}`);
    if (filter.correlationId !== undefined) where.push(`metadata->>'correlationId' = ${param(filter.correlationId)}`);
    // Event times are written as UTC ISO 8601 text (\`toISOString\`), so text order is time order.
    if (filter.from !== undefined) where.push(`metadata->>'time' >= ${param(filter.from)}`);
    if (filter.to !== undefined) where.push(`metadata->>'time' < ${param(filter.to)}`);
    const { rows } = await pool.query<EventRow>(
      `SELECT ${COLUMNS} FROM es.events
       WHERE (transaction_id, global_position) > ($1::xid8, $2::bigint)
         AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         ${where.map((w) => `AND ${w}`).join(' ')}
       ORDER BY transaction_id, global_position
       LIMIT $3`,
      values,
    );
    return rows.map(toRecorded);
  }

  function subscribe(options: SubscribeOptions, handler: (batch: RecordedEvent[]) => Promise<void>): Subscription {
    let position = options.after ?? null;
    let stopped = false;
    let wake: (() => void) | null = null;
    let wakeOnAppend = false;
    // An append that lands while a read is in flight must not wait out a whole poll.
    let dirty = false;
    const onAppend = () => {
      dirty = true;
      if (wakeOnAppend) wake?.();
    };
    appended.on('append', onAppend);
    /** Waits `ms`, or less when stopped or, while polling, when a local append commits. */
    const sleep = (ms: number, polling: boolean) =>
      new Promise<void>((resolve) => {
        // Stopped while a read or a handler was under way: `stop` found no sleeper to wake, so none may start.
        if (stopped || (polling && dirty)) return resolve();
        const timer = setTimeout(done, ms);
        function done() {
          clearTimeout(timer);
          wake = null;
          resolve();
        }
        wake = done;
        wakeOnAppend = polling;
      });

    const loop = (async () => {
      while (!stopped) {
        try {
          dirty = false;
          const batch = await recent.next(position, options.batchSize ?? 500);
          if (batch.length === 0) {
            // Held back by an older transaction: `next` itself waits a little before it reads again.
            if (!recent.heldBack(position)) await sleep(pollMs, true);
            continue;
          }
          await handler(batch);
          position = batch[batch.length - 1]!.position;
        } catch (error) {
          options.onError?.(error);
          if (!stopped) await sleep(1000, false);
        }
      }
    })();

    return {
      async stop() {
        stopped = true;
        appended.off('append', onAppend);
        wake?.();
        await loop;
      },
    };
  }

  return { kind: 'postgres', append, appendMany, readStream, readStreams, readAll, countAfter, readFiltered, subscribe, close: async () => {} };
}

/** pg hands int8 as a string unless a process-wide type parser turns it into a number. */
type Int8 = string | number;

/** A `pg.Pool`, or a client (possibly inside a transaction). */
export type Queryable = Pick<pg.Pool, 'query'> | Pick<pg.PoolClient, 'query'>;

/** How each expectation claims the revisions: the claim yields the revision before the first new event. */
const CLAIMS = {
  any: `INSERT INTO es.streams AS s (stream_id, revision) VALUES ($1, $2 - 1)
        ON CONFLICT (stream_id) DO UPDATE SET revision = s.revision + $2
        RETURNING s.revision - $2 AS base`,
  no_stream: `INSERT INTO es.streams (stream_id, revision) VALUES ($1, $2 - 1)
        ON CONFLICT (stream_id) DO NOTHING
        RETURNING -1::bigint AS base`,
  exists: `UPDATE es.streams SET revision = revision + $2 WHERE stream_id = $1
        RETURNING revision - $2 AS base`,
  revision: `UPDATE es.streams SET revision = revision + $2 WHERE stream_id = $1 AND revision = $4
        RETURNING revision - $2 AS base`,
};

/** One statement per append: claim the revisions, insert the events, answer with the last one (none when the claim failed). */
const APPEND = Object.fromEntries(
  Object.entries(CLAIMS).map(([kind, claim]) => [
    kind,
    `WITH claim AS (${claim}),
     inserted AS (
       INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
       SELECT $1, claim.base + e.ord, (e.v->>0)::uuid, e.v->>1, e.v->2, e.v->3
       FROM claim, jsonb_array_elements($3::jsonb) WITH ORDINALITY AS e(v, ord)
       RETURNING revision, transaction_id, global_position)
     SELECT revision, transaction_id::text AS tx, global_position FROM inserted ORDER BY revision DESC LIMIT 1`,
  ]),
) as Record<keyof typeof CLAIMS, string>;

const COLUMNS = `event_id, type, data, metadata, stream_id, revision, transaction_id::text AS tx, global_position`;

interface EventRow {
  event_id: string;
  type: string;
  data: unknown;
  metadata: RecordedEvent['metadata'];
  stream_id: string;
  revision: Int8;
  tx: string;
  global_position: Int8;
}

const toRecorded = (r: EventRow): RecordedEvent => ({
  id: r.event_id,
  type: r.type,
  data: r.data,
  metadata: r.metadata,
  streamId: r.stream_id,
  revision: Number(r.revision),
  position: { commit: BigInt(r.tx), prepare: BigInt(r.global_position) } satisfies Position,
});

const isUniqueViolation = (e: unknown): boolean => (e as { code?: string })?.code === '23505';
