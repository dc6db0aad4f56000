import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import { CheckpointedSubscriber, loadCheckpoint } from '../domain/eventstore/subscriber.js';
import { notifyCheckpoint, type Leases } from '../domain/eventstore/leases.js';
import { comparePositions, type Position, type RecordedEvent } from '../domain/shared/events.js';
import { PositionWaiters } from '../domain/eventstore/waiters.js';
import type { Database } from './database.js';

/**
 * A read model: PostgreSQL tables kept up to date from events. `apply` must be
 * idempotent (guarded by stream revision or `ON CONFLICT`), because a batch
 * can be offered again after a crash between the store and the checkpoint.
 */
export interface Projection {
  name: string;
  /**
   * The tables this projection owns, in an order that `TRUNCATE … CASCADE` accepts. `apply` writes
   * these and no others, so a rebuild can build them apart from every other read model.
   */
  tables: string[];
  /**
   * Tables of other projections that `apply` reads: rebuilding this projection rebuilds their
   * owners too, so a replay never reads them as they are now instead of as they were then.
   */
  reads?: string[];
  /** Applies a batch in global order inside the runner's transaction. Ignores event types it does not know. */
  apply(tx: Transaction<Database>, batch: RecordedEvent[]): Promise<void>;
  /**
   * Called once the batch's transaction has committed, before writers waiting
   * for it are answered: for in-memory followers of the read models (caches)
   * that must never run ahead of them nor lag behind a write's answer.
   */
  committed?(batch: RecordedEvent[]): void;
  /** Called when its tables were emptied (a reset before a replay): forget whatever was remembered of them. */
  emptied?(): void;
}

/**
 * Cluster mode: the runner leads on one node (`leases`); every node learns
 * the leader's checkpoint from `NOTIFY` (polling while writers wait, should a
 * notification be missed), and `indexes` is this node's own follower of the
 * log, which writers wait for as well.
 */
export interface RunnerCluster {
  leases: Leases;
  indexes: { readonly position: Position | null; waitFor(position: Position, timeoutMs: number): Promise<void> };
}

/**
 * The lock between the runner and a rebuild (`projections/rebuild.ts`): every
 * batch transaction takes it shared before touching a read model; a rebuild
 * takes it exclusively while it swaps tables, so the runner (on whichever node
 * leads) pauses between two batches and resumes on the new tables.
 */
const SWAP_GATE = 'platform-read-model-swap';

export async function passSwapGate(tx: Transaction<any>): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock_shared(hashtextextended(${SWAP_GATE}, 0))`.execute(tx);
}

/**
 * The identities (OIDs) of `tables` as the transaction sees them now: a rebuild's swap replaces a table by
 * another of the same name, so they change with every swap (and with any other drop and re-create). Read in
 * a statement of its own after the gate, so it sees every swap that the gate waited for.
 */
async function tableIdentities(tx: Transaction<any>, tables: string[]): Promise<string> {
  const { rows } = await sql<{ ids: string | null }>`
    SELECT string_agg(c.relname || '=' || c.oid::text, ',' ORDER BY c.relname) AS ids
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE c.relname = ANY(${tables}::text[]) AND n.nspname = ANY(current_schemas(false)) AND c.relkind IN ('r', 'p')`.execute(tx);
  return rows[0]?.ids ?? '';
}

/** Taken by a rebuild inside its swap transaction: waits for the batch under way, then holds every later one. */
export async function closeSwapGate(tx: Transaction<any>): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${SWAP_GATE}, 0))`.execute(tx);
}

/** How often a node polls the leader's checkpoint while writers wait for it. */
const POLL_MS = 250;

/** The read models' checkpoint in `es.checkpoints`: the runner's name unless it is given another. */
export const READ_MODELS = 'read-models';

/**
 * Applies the store's global order, in batches, to every projection in one
 * transaction that also stores the checkpoint (the checkpointed subscriber in
 * transactional mode), so a crash never applies half a batch, nor one twice.
 * Writers wait here for their events to reach the read models.
 */
export class ProjectionRunner {
  private readonly waiters = new PositionWaiters('The change is stored but the read models did not catch up in time; read it again shortly');
  /** Its follower of the event log (its lag is measured from it). */
  readonly subscriber: CheckpointedSubscriber<Database>;

  constructor(
    store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly projections: Projection[],
    log: Logger,
    readonly name = READ_MODELS,
    private readonly cluster: RunnerCluster | null = null,
  ) {
    this.remembering = projections.filter((p) => p.emptied);
    this.subscriber = new CheckpointedSubscriber<Database>({
      name,
      store,
      db,
      log,
      batchSize: 1000,
      transactional: true,
      cluster: cluster && { leases: cluster.leases, ready: async () => {} },
      handle: async (batch, tx) => {
        // Waits while a rebuild swaps read models in, so no batch ever straddles the swap.
        await passSwapGate(tx!);
        await this.forgetSwapped(tx!);
        for (const projection of this.projections) await projection.apply(tx!, batch);
        // Delivered to every node when (and only if) the batch commits.
        if (cluster) await notifyCheckpoint(tx!, name, batch[batch.length - 1]!.position.commit, batch[batch.length - 1]!.position.prepare);
      },
      done: (batch, last) => {
        for (const projection of this.projections) projection.committed?.(batch);
        this.observe(last);
      },
    });
    if (cluster) {
      cluster.leases.onCheckpoint((payload) => {
        const [n, c, p] = payload.split(' ');
        if (n === name && c && p) this.observe({ commit: BigInt(c), prepare: BigInt(p) });
      });
    }
  }

  /** The projections that remember what they wrote between batches (`emptied` forgets it), and the identities of their tables last seen. */
  private readonly remembering: Projection[];
  private tablesSeen: string | null = null;

  /**
   * A rebuild swapped new tables in since the last batch: the projections that remember rows of the old
   * ones forget them, so nothing they remember of a replaced table (a document at a revision the rebuilt
   * row also has) is written over the rebuilt rows.
   */
  private async forgetSwapped(tx: Transaction<Database>): Promise<void> {
    if (this.remembering.length === 0) return;
    const seen = await tableIdentities(tx, this.remembering.flatMap((p) => p.tables));
    if (seen === this.tablesSeen) return;
    for (const projection of this.remembering) projection.emptied!();
    this.tablesSeen = seen;
  }

  /** The furthest checkpoint of the read models known here: applied by this node, or notified by the leader. */
  private known: Position | null = null;
  private poll: NodeJS.Timeout | null = null;

  /** The read models include everything up to `at`: writers waiting for it (and this node's indexes) are answered. */
  private observe(at: Position): void {
    if (!this.known || comparePositions(at, this.known) > 0) this.known = at;
    this.settle();
  }

  private settle(): void {
    this.waiters.settle((position) => this.modelsReached(position));
  }

  /** The read models' checkpoint: what this node applied, or what the leader notified, whichever is further. */
  private get models(): Position | null {
    const own = this.subscriber.position;
    if (!own) return this.known;
    return !this.known || comparePositions(own, this.known) > 0 ? own : this.known;
  }

  private modelsReached(position: Position): boolean {
    const at = this.models;
    return at !== null && comparePositions(at, position) >= 0;
  }

  private reached(position: Position): boolean {
    if (!this.modelsReached(position)) return false;
    const local = this.cluster?.indexes.position;
    return !this.cluster || (local != null && comparePositions(local, position) >= 0);
  }

  /** While writers wait on a node that does not lead: reads the leader's checkpoint, in case a notification was lost. */
  private polling(): void {
    if (!this.cluster || this.poll || this.waiters.size === 0) return;
    this.poll = setTimeout(async () => {
      try {
        const at = await loadCheckpoint(this.db, this.name);
        if (at) this.observe(at);
      } catch {
        // The database does not answer: writers time out with 503, as they would on one node.
      }
      this.poll = null;
      this.polling();
    }, POLL_MS);
    this.poll.unref();
  }

  /** Applies everything stored so far, then follows live; resolves once caught up. */
  async start(): Promise<void> {
    await this.subscriber.start({ catchUp: true });
  }

  async stop(): Promise<void> {
    await this.subscriber.stop();
    if (this.poll) clearTimeout(this.poll);
    this.poll = null;
  }

  /** True once started and the last batch did not fail (a standby of a cluster is healthy). */
  get healthy(): boolean {
    return this.subscriber.healthy;
  }

  /** `leading`, `standby` (another node of the cluster applies the read models) or `stopped`. */
  get role(): 'leading' | 'standby' | 'stopped' {
    return this.subscriber.role;
  }

  /** Events set aside because no projection could apply them (see `CheckpointedSubscriber`). */
  get parked(): number {
    return this.subscriber.parked;
  }

  /** The read models' checkpoint as known on this node. */
  get checkpoint(): Position | null {
    return this.models;
  }

  /**
   * Resolves once the read models include the event at `position` (in a
   * cluster: the leader's checkpoint has passed it, and so has this node's
   * indexes); `UnavailableError` after `timeoutMs`.
   */
  waitFor(position: Position, timeoutMs: number): Promise<void> {
    if (this.reached(position)) return Promise.resolve();
    if (this.cluster) {
      // The node's indexes answer through their own waiter; the read models through this runner's.
      const local = this.cluster.indexes.waitFor(position, timeoutMs);
      const models = this.waitForModels(position, timeoutMs);
      return Promise.all([local, models]).then(() => undefined);
    }
    return this.waitForModels(position, timeoutMs);
  }

  private waitForModels(position: Position, timeoutMs: number): Promise<void> {
    if (this.modelsReached(position)) return Promise.resolve();
    const promise = this.waiters.wait(position, timeoutMs);
    this.polling();
    return promise;
  }

  /**
   * In a cluster: waits until this node's indexes hold everything the read
   * models show, so a write another node has answered is visible here too
   * (the broker's registry, the principals, the translator index): a request
   * calls this before it reads them. On one process the indexes commit with
   * the read models, and there is nothing to wait for.
   */
  async sync(timeoutMs: number): Promise<void> {
    if (!this.cluster) return;
    const at = await this.storedCheckpoint();
    if (!at) return;
    this.observe(at);
    const local = this.cluster.indexes.position;
    if (local && comparePositions(local, at) >= 0) return;
    await this.cluster.indexes.waitFor(at, timeoutMs);
  }

  /** The read of the stored checkpoint under way, and the one that follows it. */
  private reading: Promise<Position | null> | null = null;
  private following: Promise<Position | null> | null = null;

  /**
   * The stored checkpoint, read at or after the call: callers that come while
   * a read is under way share the one read after it (that read may have been
   * sent before their write was answered), so a burst of requests costs two
   * reads, not one each.
   */
  private storedCheckpoint(): Promise<Position | null> {
    if (!this.reading) {
      this.reading = loadCheckpoint(this.db, this.name).finally(() => {
        this.reading = null;
      });
      return this.reading;
    }
    this.following ??= this.reading
      .catch(() => null)
      .then(() => {
        this.following = null;
        return this.storedCheckpoint();
      });
    return this.following;
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
    for (const projection of this.projections) projection.emptied?.();
  }
}
