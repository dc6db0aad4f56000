import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore, Subscription } from './port.js';
import type { Position, RecordedEvent } from '../shared/events.js';

/**
 * The one mechanism for everything that follows the event log: the
 * projection runner and every reactor. It loads its checkpoint from
 * `es.checkpoints`, reads the store's global order in batches from there,
 * hands each batch to `handle`, and saves the checkpoint:
 *
 * - `transactional`: `handle` gets a transaction, and the checkpoint is saved
 *   in that same transaction, so a batch is applied exactly once (read models);
 * - otherwise the checkpoint is saved after `handle` returns, so what `handle`
 *   completes is done at least once (side effects; they make a repeat harmless
 *   with ids derived from the event).
 *
 * A batch that fails is offered again after a pause, from the same position.
 * When it fails again, its events are handled one at a time, so the one that
 * fails is found: tried once more, and if it fails while the database
 * answers, it is *parked* (recorded in `es.parked_events`, logged) and the
 * subscriber moves past it. One event that cannot be handled (a value a
 * read model refuses, a bug in a handler) never holds up every later event;
 * an outage of the database only pauses, and nothing is parked for it.
 */
export interface SubscriberOptions<DB> {
  /** The checkpoint's name in `es.checkpoints`. */
  name: string;
  store: EventStore;
  db: Kysely<DB>;
  log: Logger;
  batchSize?: number;
  transactional?: boolean;
  handle(batch: RecordedEvent[], tx: Transaction<DB> | null): Promise<void>;
  /** After a batch is done and its checkpoint saved (transactional: committed). */
  done?(batch: RecordedEvent[], position: Position): void;
}

/** How far a subscriber is behind the store: events not yet handled, and the age in seconds of the oldest of them. */
export interface Lag {
  events: number;
  seconds: number;
}

/** Lag in events is counted up to this many; past it, the figure says "very far behind" well enough. */
const LAG_CAP = 1_000_000;

export class CheckpointedSubscriber<DB> {
  private at: Position | null = null;
  private subscription: Subscription | null = null;
  private lastError: unknown = null;

  constructor(private readonly options: SubscriberOptions<DB>) {}

  get name(): string {
    return this.options.name;
  }

  /** The position of the last batch done; null before the first. */
  get position(): Position | null {
    return this.at;
  }

  /** Started, and the last batch did not fail. */
  get healthy(): boolean {
    return this.subscription !== null && this.lastError === null;
  }

  /**
   * Measured against the store, not from what the subscriber last saw, so a
   * subscriber that is stuck (or stopped) shows a growing lag. The age is
   * that of the oldest event not yet handled (by its `time`), 0 when every
   * stored event is handled. Where the store cannot count, events are counted
   * up to one batch.
   */
  async lag(now = Date.now()): Promise<Lag> {
    const { store, batchSize = 500 } = this.options;
    const at = this.at;
    const [next] = await store.readAll({ after: at, limit: 1 });
    if (!next) return { events: 0, seconds: 0 };
    const events = store.countAfter ? await store.countAfter(at, LAG_CAP) : (await store.readAll({ after: at, limit: batchSize })).length;
    const time = Date.parse(next.metadata.time);
    return { events, seconds: Number.isFinite(time) ? Math.max(0, (now - time) / 1000) : 0 };
  }

  /** Loads the checkpoint; with `catchUp`, applies everything stored so far before following live. */
  async start({ catchUp = false }: { catchUp?: boolean } = {}): Promise<void> {
    this.at = await loadCheckpoint(this.options.db, this.options.name);
    if (catchUp) await this.catchUp();
    const { store, batchSize = 500, log, name } = this.options;
    this.subscription = store.subscribe(
      {
        after: this.at,
        batchSize,
        onError: (error) => {
          this.lastError = error;
          log.error({ err: error, subscriber: name }, 'a batch of the event log failed; retrying it');
        },
      },
      (batch) => this.applyIsolating(batch),
    );
  }

  /** Events set aside by this subscriber so far (in this process). */
  parked = 0;
  private failures = 0;

  private async applyIsolating(batch: RecordedEvent[]): Promise<void> {
    try {
      await this.apply(batch);
      this.failures = 0;
      return;
    } catch (error) {
      // The first failure is retried as it is, by the subscription, after a pause: most failures are passing ones.
      if (++this.failures < 2) throw error;
    }
    this.failures = 0;
    for (const event of batch) {
      try {
        await this.apply([event]);
      } catch (first) {
        if (!(await this.databaseAnswers())) throw first;
        try {
          await this.apply([event]);
        } catch (again) {
          if (!(await this.databaseAnswers())) throw again;
          await this.park(event, again);
        }
      }
    }
  }

  private async databaseAnswers(): Promise<boolean> {
    try {
      await sql`SELECT 1`.execute(this.options.db);
      return true;
    } catch {
      return false;
    }
  }

  private async park(event: RecordedEvent, error: unknown): Promise<void> {
    const { db, name, log } = this.options;
    const why = String((error as Error)?.message ?? error).slice(0, 2000);
    log.error({ err: error, subscriber: name, eventId: event.id, streamId: event.streamId, type: event.type }, 'an event could not be handled; it is set aside and the subscriber moves on');
    await db.transaction().execute(async (tx) => {
      await sql`INSERT INTO es.parked_events (subscriber, event_id, stream_id, type, commit_position, prepare_position, error)
        VALUES (${name}, ${event.id}, ${event.streamId}, ${event.type}, ${String(event.position.commit)}, ${String(event.position.prepare)}, ${why})
        ON CONFLICT DO NOTHING`.execute(tx);
      await saveCheckpoint(tx, name, event.position);
    });
    this.at = event.position;
    this.parked++;
    this.options.done?.([event], event.position);
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
    this.subscription = null;
  }

  /** Handles every event stored so far, then returns. */
  async catchUp(): Promise<void> {
    for (;;) {
      const batch = await this.options.store.readAll({ after: this.at, limit: this.options.batchSize ?? 500 });
      if (batch.length === 0) return;
      try {
        await this.applyIsolating(batch);
      } catch (error) {
        // The database did not answer: wait and try the same batch again, as the subscription does.
        this.options.log.error({ err: error, subscriber: this.options.name }, 'catching up failed; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** Forgets the position (after the caller emptied what was built from it) and removes the checkpoint. */
  async reset(tx?: Transaction<DB>): Promise<void> {
    await sql`DELETE FROM es.checkpoints WHERE name = ${this.options.name}`.execute(tx ?? this.options.db);
    this.at = null;
  }

  private async apply(batch: RecordedEvent[]): Promise<void> {
    const { db, handle, transactional, name } = this.options;
    const last = batch[batch.length - 1]!.position;
    if (transactional) {
      await db.transaction().execute(async (tx) => {
        await handle(batch, tx);
        await saveCheckpoint(tx, name, last);
      });
    } else {
      await handle(batch, null);
      await saveCheckpoint(db, name, last);
    }
    this.at = last;
    this.lastError = null;
    this.options.done?.(batch, last);
  }
}

export async function loadCheckpoint(db: Kysely<any>, name: string): Promise<Position | null> {
  const { rows } = await sql<{ c: string; p: string }>`SELECT commit_position AS c, prepare_position AS p FROM es.checkpoints WHERE name = ${name}`.execute(db);
  const row = rows[0];
  return row ? { commit: BigInt(row.c), prepare: BigInt(row.p) } : null;
}

export async function saveCheckpoint(db: Kysely<any> | Transaction<any>, name: string, position: Position): Promise<void> {
  await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
    VALUES (${name}, ${String(position.commit)}, ${String(position.prepare)}, now())
    ON CONFLICT (name) DO UPDATE SET commit_position = EXCLUDED.commit_position,
      prepare_position = EXCLUDED.prepare_position, updated_at = now()`.execute(db);
}
