import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import { CheckpointedSubscriber } from '../domain/eventstore/subscriber.js';
import { comparePositions, type Position, type RecordedEvent } from '../domain/shared/events.js';
import { UnavailableError } from '../domain/shared/errors.js';
import type { Database } from './database.js';

/**
 * A read model: PostgreSQL tables kept up to date from events. `apply` must be
 * idempotent (guarded by stream revision or `ON CONFLICT`), because a batch
 * can be offered again after a crash between the store and the checkpoint.
 */
export interface Projection {
  name: string;
  /** The tables this projection owns, in an order that `TRUNCATE … CASCADE` accepts; a rebuild empties them. */
  tables: string[];
  /** Applies a batch in global order inside the runner's transaction. Ignores event types it does not know. */
  apply(tx: Transaction<Database>, batch: RecordedEvent[]): Promise<void>;
  /**
   * Called once the batch's transaction has committed, before writers waiting
   * for it are answered: for in-memory followers of the read models (caches)
   * that must never run ahead of them nor lag behind a write's answer.
   */
  committed?(batch: RecordedEvent[]): void;
}

interface Waiter {
  position: Position;
  resolve: () => void;
}

/**
 * Applies the store's global order, in batches, to every projection in one
 * transaction that also stores the checkpoint (the checkpointed subscriber in
 * transactional mode), so a crash never applies half a batch, nor one twice.
 * Writers wait here for their events to reach the read models.
 */
export class ProjectionRunner {
  private waiters: Waiter[] = [];
  /** Its follower of the event log (its lag is measured from it). */
  readonly subscriber: CheckpointedSubscriber<Database>;

  constructor(
    store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly projections: Projection[],
    log: Logger,
    readonly name = 'read-models',
  ) {
    this.subscriber = new CheckpointedSubscriber<Database>({
      name,
      store,
      db,
      log,
      batchSize: 1000,
      transactional: true,
      handle: async (batch, tx) => {
        for (const projection of this.projections) await projection.apply(tx!, batch);
      },
      done: (batch, last) => {
        for (const projection of this.projections) projection.committed?.(batch);
        const ready = this.waiters.filter((w) => comparePositions(last, w.position) >= 0);
        if (ready.length) {
          this.waiters = this.waiters.filter((w) => comparePositions(last, w.position) < 0);
          for (const w of ready) w.resolve();
        }
      },
    });
  }

  /** Applies everything stored so far, then follows live; resolves once caught up. */
  async start(): Promise<void> {
    await this.subscriber.start({ catchUp: true });
  }

  async stop(): Promise<void> {
    await this.subscriber.stop();
  }

  /** True once started and the last batch did not fail. */
  get healthy(): boolean {
    return this.subscriber.healthy;
  }

  /** Events set aside because no projection could apply them (see `CheckpointedSubscriber`). */
  get parked(): number {
    return this.subscriber.parked;
  }

  get checkpoint(): Position | null {
    return this.subscriber.position;
  }

  /** Resolves once the read models include the event at `position`; `UnavailableError` after `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<void> {
    const at = this.subscriber.position;
    if (at && comparePositions(at, position) >= 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== waiter);
        reject(new UnavailableError('The change is stored but the read models did not catch up in time; read it again shortly'));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  /** Applies every event stored so far, then returns. Used by rebuild and tests. */
  async catchUp(): Promise<void> {
    await this.subscriber.catchUp();
  }

  /** Empties every read model and the checkpoint, in one transaction. */
  async reset(): Promise<void> {
    const tables = this.projections.flatMap((p) => p.tables);
    await this.db.transaction().execute(async (tx) => {
      if (tables.length) await sql.raw(`TRUNCATE ${tables.join(', ')} CASCADE`).execute(tx);
      await this.subscriber.reset(tx);
    });
  }
}
