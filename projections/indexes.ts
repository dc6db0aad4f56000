import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import { CheckpointedSubscriber } from '../domain/eventstore/subscriber.js';
import { comparePositions, type Position } from '../domain/shared/events.js';
import { PositionWaiters } from '../domain/eventstore/waiters.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';

/**
 * A node's own in-memory indexes of the log, in a cluster: the broker's
 * registry, the translator index, the principals cache, the connections
 * that follow connectors. Every node needs them current, whichever node
 * leads the read models, so each node follows the log for them itself,
 * with a checkpoint kept only in memory: at start the indexes load their
 * state from the read models and the follower starts from the read models'
 * checkpoint read in the same snapshot (`start(from)`); their handlers are
 * idempotent, so events applied twice around that point change nothing.
 *
 * In a single process these same projections run inside the projection
 * runner instead, and this class is not used.
 */
export class NodeIndexes {
  private subscriber: CheckpointedSubscriber<Database> | null = null;
  private readonly waiters = new PositionWaiters('The change is stored but this node has not caught up with it in time; read it again shortly');
  private from: Position | null = null;

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly indexes: Projection[],
    private readonly log: Logger,
  ) {
    for (const index of indexes) if (index.tables.length) throw new Error(`${index.name} owns tables: it belongs in the projection runner`);
  }

  /** Follows the log after `from`, the read models' checkpoint when the indexes loaded their state. */
  async start(from: Position | null): Promise<void> {
    this.from = from;
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: 'node-indexes',
      store: this.store,
      db: this.db,
      log: this.log,
      batchSize: 1000,
      checkpoint: { from },
      handle: async (batch) => {
        // Indexes own no tables: they never touch the transaction they are given inside the runner.
        for (const index of this.indexes) await index.apply(NO_TRANSACTION, batch);
      },
      done: (batch, last) => {
        for (const index of this.indexes) index.committed?.(batch);
        this.waiters.settle((position) => comparePositions(last, position) >= 0);
      },
    });
    await this.subscriber.start();
  }

  async stop(): Promise<void> {
    await this.subscriber?.stop();
  }

  /** Everything up to here is in this node's indexes. */
  get position(): Position | null {
    return this.subscriber?.position ?? this.from;
  }

  get healthy(): boolean {
    return this.subscriber?.healthy ?? false;
  }

  get parked(): number {
    return this.subscriber?.parked ?? 0;
  }

  /** Resolves once this node's indexes include `position`; `UnavailableError` after `timeoutMs`. */
  waitFor(position: Position, timeoutMs: number): Promise<void> {
    const at = this.position;
    if (at && comparePositions(at, position) >= 0) return Promise.resolve();
    return this.waiters.wait(position, timeoutMs);
  }
}

const NO_TRANSACTION = null as unknown as Transaction<Database>;
