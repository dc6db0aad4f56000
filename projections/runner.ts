import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore, Subscription } from '../domain/eventstore/port.js';
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
 * Reads the store's global order in batches and applies each batch to every
 * projection in one transaction that also stores the checkpoint, so a crash
 * never applies half a batch, nor one twice.
 */
export class ProjectionRunner {
  private position: Position | null = null;
  private waiters: Waiter[] = [];
  private subscription: Subscription | null = null;
  private lastError: unknown = null;

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly projections: Projection[],
    private readonly log: Logger,
    readonly name = 'read-models',
  ) {}

  /** Applies everything stored so far, then follows live; resolves once caught up. */
  async start(): Promise<void> {
    this.position = await this.loadCheckpoint();
    await this.catchUp();
    this.subscription = this.store.subscribe(
      {
        after: this.position,
        batchSize: 1000,
        onError: (error) => {
          this.lastError = error;
          this.log.error({ err: error, projection: this.name }, 'projection batch failed; retrying');
        },
      },
      (batch) => this.applyBatch(batch),
    );
  }

  async stop(): Promise<void> {
    await this.subscription?.stop();
    this.subscription = null;
  }

  /** True once started and the last batch did not fail. */
  get healthy(): boolean {
    return this.subscription !== null && this.lastError === null;
  }

  get checkpoint(): Position | null {
    return this.position;
  }

  /** Resolves once the read models include the event at `position`; `UnavailableError` after `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<void> {
    if (this.position && comparePositions(this.position, position) >= 0) return Promise.resolve();
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
    for (;;) {
      const batch = await this.store.readAll({ after: this.position, limit: 1000 });
      if (batch.length === 0) return;
      await this.applyBatch(batch);
    }
  }

  private async applyBatch(batch: RecordedEvent[]): Promise<void> {
    const last = batch[batch.length - 1]!.position;
    await this.db.transaction().execute(async (tx) => {
      for (const projection of this.projections) await projection.apply(tx, batch);
      await sql`INSERT INTO es.checkpoints (name, commit_position, prepare_position, updated_at)
        VALUES (${this.name}, ${String(last.commit)}, ${String(last.prepare)}, now())
        ON CONFLICT (name) DO UPDATE SET commit_position = EXCLUDED.commit_position,
          prepare_position = EXCLUDED.prepare_position, updated_at = now()`.execute(tx);
    });
    this.position = last;
    this.lastError = null;
    for (const projection of this.projections) projection.committed?.(batch);
    const ready = this.waiters.filter((w) => comparePositions(last, w.position) >= 0);
    if (ready.length) {
      this.waiters = this.waiters.filter((w) => comparePositions(last, w.position) < 0);
      for (const w of ready) w.resolve();
    }
  }

  private async loadCheckpoint(): Promise<Position | null> {
    const { rows } = await sql<{ commit_position: string; prepare_position: string }>`
      SELECT commit_position, prepare_position FROM es.checkpoints WHERE name = ${this.name}`.execute(this.db);
    const row = rows[0];
    return row ? { commit: BigInt(row.commit_position), prepare: BigInt(row.prepare_position) } : null;
  }

  /** Empties every read model and the checkpoint, in one transaction. */
  async reset(): Promise<void> {
    const tables = this.projections.flatMap((p) => p.tables);
    await this.db.transaction().execute(async (tx) => {
      if (tables.length) await sql.raw(`TRUNCATE ${tables.join(', ')} CASCADE`).execute(tx);
      await sql`DELETE FROM es.checkpoints WHERE name = ${this.name}`.execute(tx);
    });
    this.position = null;
  }
}
