import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore, Subscription } from './port.js';
import type { Position, RecordedEvent } from '../shared/events.js';
import { LeaseLostError, SOLE, type Fence, type Leases } from './leases.js';
import { UnavailableError } from '../shared/errors.js';

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
 *
 * In a cluster (`cluster` given) a subscriber runs only on the node that
 * leads its name (`Leases`): elsewhere it stands by. Its fence is checked
 * inside every batch transaction (transactional), before every batch and with
 * every checkpoint (otherwise), and by the handler before each side effect
 * (`fence.check()`), so a node that lost the lead never applies, delivers or
 * moves the checkpoint. Before a batch is handled, the node's in-memory
 * indexes (`cluster.ready`) must have applied it, since handlers look things
 * up in them.
 */
export interface SubscriberOptions<DB> {
  /** The checkpoint's name in `es.checkpoints`. */
  name: string;
  store: EventStore;
  db: Kysely<DB>;
  log: Logger;
  batchSize?: number;
  transactional?: boolean;
  /**
   * Handles a batch. A side-effect handler (not transactional) that found nothing to do in it
   * answers `false`: its checkpoint is then saved later (with the next batch that had work, after
   * `IDLE_SAVE_MS` at most, and when it stops), sparing a write per batch. A restart reads those
   * events again, and the handler finds nothing to do in them again.
   */
  handle(batch: RecordedEvent[], tx: Transaction<DB> | null): Promise<void | boolean>;
  /** How long idle batches may go unsaved; `IDLE_SAVE_MS` unless given. */
  idleSaveMs?: number;
  /** After a batch is done and its checkpoint saved (transactional: committed). */
  done?(batch: RecordedEvent[], position: Position): void;
  /**
   * Where the checkpoint lives: `es.checkpoints` (the default), or only in
   * memory, starting after `from` (a node's own indexes, rebuilt at each start).
   */
  checkpoint?: 'stored' | { from: Position | null };
  /** The part's own state, started where it leads (before the first batch) and stopped where it stops leading. */
  leading?: { gained(fence: Fence): Promise<void>; lost(): Promise<void> };
  /** Cluster mode: leadership and the node's indexes. Absent: a single process, which leads everything. */
  cluster?: SubscriberCluster | null;
}

export interface SubscriberCluster {
  leases: Leases;
  /** Resolves once this node's in-memory indexes have applied everything up to `position`. */
  ready(position: Position): Promise<void>;
}

/** How far a subscriber is behind the store: events not yet handled, and the age in seconds of the oldest of them. */
export interface Lag {
  events: number;
  seconds: number;
}

/** What a subscriber says of itself: where it runs, whether it does as it should, and why not. */
export interface SubscriberState {
  role: 'leading' | 'standby' | 'stopped';
  up: boolean;
  why?: string;
}

/** A batch under way for longer than this counts as stalled (waiting on a lock, or on a database that does not answer). */
export const STALLED_MS = 10_000;

/** How long the checkpoint of a side-effect subscriber may stay unsaved while its batches bring it nothing to do. */
export const IDLE_SAVE_MS = 1000;

/** Lag in events is counted up to this many; past it, the figure says "very far behind" well enough. */
const LAG_CAP = 1_000_000;

export class CheckpointedSubscriber<DB> {
  private at: Position | null = null;
  private subscription: Subscription | null = null;
  private lastError: unknown = null;
  private current: Fence | null = null;
  private registered = false;
  /** The position handled but not yet saved (idle batches), and when the checkpoint was last saved. */
  private unsaved: Position | null = null;
  private savedAt = 0;

  constructor(private readonly options: SubscriberOptions<DB>) {}

  /** What proves this node may act for the subscriber now: check it before each side effect. */
  get fence(): Fence {
    return this.current ?? (this.options.cluster ? STANDBY : SOLE);
  }

  /** `leading` (running here), `standby` (another node leads), or `stopped`. */
  get role(): 'leading' | 'standby' | 'stopped' {
    return this.current ? 'leading' : this.registered ? 'standby' : 'stopped';
  }

  get name(): string {
    return this.options.name;
  }

  /** The position of the last batch done; null before the first. */
  get position(): Position | null {
    return this.at;
  }

  /**
   * Whether it runs as it should here: a standby does (another node runs it); otherwise it must be
   * following the log, its last batch must not have failed, and its batch under way, if any, must not
   * have run for `stalledMs` (`STALLED_MS` by default) or more. `why` says what is wrong.
   */
  state(now = Date.now(), stalledMs = STALLED_MS): SubscriberState {
    const role = this.role;
    if (role === 'standby') return { role, up: true };
    if (this.subscription === null) return { role, up: false, why: role === 'stopped' ? 'stopped' : 'not following the log yet' };
    if (this.lastError !== null) return { role, up: false, why: `its last batch failed: ${String((this.lastError as Error)?.message ?? this.lastError)}` };
    if (this.busySince && now - this.busySince >= stalledMs) return { role, up: false, why: `a batch has been under way for ${Math.round((now - this.busySince) / 1000)} s` };
    return { role, up: true };
  }

  /** Started, and the last batch did not fail; in a cluster, a standby is healthy too. */
  get healthy(): boolean {
    if (this.registered && !this.current) return true;
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

  /**
   * Loads the checkpoint; with `catchUp`, applies everything stored so far
   * before following live. In a cluster it only registers for leadership
   * and returns: the subscriber starts whenever this node takes the lead.
   */
  async start({ catchUp = false }: { catchUp?: boolean } = {}): Promise<void> {
    const cluster = this.options.cluster;
    if (cluster && this.options.checkpoint !== undefined && this.options.checkpoint !== 'stored') throw new Error('a node-local subscriber has no leadership');
    if (!cluster) return this.run(SOLE, catchUp);
    this.registered = true;
    cluster.leases.register(this.options.name, { lead: (fence) => this.run(fence, false), standDown: () => this.halt() });
  }

  private async run(fence: Fence, catchUp: boolean): Promise<void> {
    const checkpoint = this.options.checkpoint ?? 'stored';
    this.at = checkpoint === 'stored' ? await loadCheckpoint(this.options.db, this.options.name) : checkpoint.from;
    this.current = fence;
    this.lastError = null;
    await this.options.leading?.gained(fence);
    if (catchUp) await this.catchUp();
    const { store, batchSize = 500, log, name } = this.options;
    this.subscription = store.subscribe(
      {
        after: this.at,
        batchSize,
        onError: (error) => {
          if (error instanceof LeaseLostError) return log.warn({ subscriber: name }, 'another node leads this subscriber now; stopping here');
          if (error instanceof StoppingError) return log.info({ subscriber: name }, error.message);
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
  /** When the batch under way started (0: none). */
  private busySince = 0;

  private async applyIsolating(batch: RecordedEvent[]): Promise<void> {
    this.busySince = Date.now();
    try {
      await this.applyOrPark(batch);
    } finally {
      this.busySince = 0;
    }
  }

  private async applyOrPark(batch: RecordedEvent[]): Promise<void> {
    try {
      await this.apply(batch);
      this.failures = 0;
      return;
    } catch (error) {
      // The first failure is retried as it is, by the subscription, after a pause: most failures are passing ones.
      if (passing(error) || ++this.failures < 2) throw error;
    }
    this.failures = 0;
    for (const event of batch) {
      try {
        await this.apply([event]);
      } catch (first) {
        if (passing(first) || !(await this.databaseAnswers())) throw first;
        try {
          await this.apply([event]);
        } catch (again) {
          if (passing(again) || !(await this.databaseAnswers())) throw again;
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
    const fence = this.fence;
    await db.transaction().execute(async (tx) => {
      await fence.hold(tx);
      await sql`INSERT INTO es.parked_events (subscriber, event_id, stream_id, type, commit_position, prepare_position, error)
        VALUES (${name}, ${event.id}, ${event.streamId}, ${event.type}, ${String(event.position.commit)}, ${String(event.position.prepare)}, ${why})
        ON CONFLICT DO NOTHING`.execute(tx);
      if (this.stored) await saveCheckpoint(tx, name, event.position);
    });
    this.unsaved = null;
    this.at = event.position;
    this.parked++;
    this.options.done?.([event], event.position);
  }

  async stop(): Promise<void> {
    if (this.registered) {
      this.registered = false;
      await this.options.cluster!.leases.unregister(this.options.name);
      return;
    }
    await this.halt();
  }

  /** Stops following, then the part's own state. */
  private async halt(): Promise<void> {
    const leading = this.current !== null;
    await this.subscription?.stop();
    this.subscription = null;
    if (this.unsaved) {
      try {
        await this.save(this.fence, this.unsaved);
      } catch (error) {
        // Lost the lead or the database: the events since the last saved checkpoint are read again, harmlessly.
        this.options.log.warn({ err: error, subscriber: this.options.name }, 'the checkpoint of idle batches was not saved');
      }
      this.unsaved = null;
    }
    if (leading) await this.options.leading?.lost();
    this.current = null;
  }

  /** Saves a side-effect subscriber's checkpoint: in a cluster, only while this node still leads it. */
  private async save(fence: Fence, position: Position): Promise<void> {
    const { db, name, cluster } = this.options;
    if (cluster) {
      await db.transaction().execute(async (tx) => {
        await fence.hold(tx);
        await saveCheckpoint(tx, name, position);
      });
    } else {
      await saveCheckpoint(db, name, position);
    }
    this.unsaved = null;
    this.savedAt = Date.now();
  }

  private get stored(): boolean {
    return (this.options.checkpoint ?? 'stored') === 'stored';
  }

  /** Handles every event stored so far, then returns. */
  async catchUp(): Promise<void> {
    for (;;) {
      const batch = await this.options.store.readAll({ after: this.at, limit: this.options.batchSize ?? 500 });
      if (batch.length === 0) return;
      try {
        await this.applyIsolating(batch);
      } catch (error) {
        if (error instanceof LeaseLostError) return;
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
    const { db, handle, transactional, name, cluster } = this.options;
    const last = batch[batch.length - 1]!.position;
    const fence = this.fence;
    if (cluster) await cluster.ready(last);
    if (transactional) {
      await db.transaction().execute(async (tx) => {
        await fence.hold(tx);
        await handle(batch, tx);
        if (this.stored) await saveCheckpoint(tx, name, last);
      });
    } else if (!this.stored) {
      await handle(batch, null);
    } else {
      if (cluster) await fence.check();
      const worked = await handle(batch, null);
      if (worked === false && Date.now() - this.savedAt < (this.options.idleSaveMs ?? IDLE_SAVE_MS)) {
        this.unsaved = last;
      } else {
        await this.save(fence, last);
      }
    }
    this.at = last;
    this.lastError = null;
    this.options.done?.(batch, last);
  }
}

/**
 * Failures that say nothing about the event, so it is never set aside for them
 * and the subscription tries again after its pause: the lead lost, or the read
 * models a handler waits for not caught up yet (a slow or paused projection
 * runner, a rebuild's swap). Parking for those would drop the event's effect
 * for good while the database still answers.
 */
const passing = (error: unknown): boolean => error instanceof LeaseLostError || error instanceof UnavailableError || error instanceof StoppingError;

/**
 * Thrown by a handler whose side effects were cut short because its part is stopping: the batch is left
 * unfinished and unsaved, to be handled again where the part runs next (as after a crash), and never parked.
 */
export class StoppingError extends Error {
  constructor(what: string) {
    super(`${what} stopped before the batch was done; it is handled again at the next start`);
  }
}

/** The fence of a subscriber that does not lead: every check fails. */
const STANDBY: Fence = {
  part: 'standby',
  signal: AbortSignal.abort(),
  check: async () => {
    throw new LeaseLostError('this subscriber');
  },
  hold: async () => {
    throw new LeaseLostError('this subscriber');
  },
};

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
