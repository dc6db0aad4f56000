import pg from 'pg';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Logger } from 'pino';

/**
 * Leadership of the parts that must run once across the nodes of a cluster
 * (the projection runner, every reactor, the connections to external
 * brokers), on the database the nodes share:
 *
 * - **Mutual exclusion**: a part runs on the node holding its PostgreSQL
 *   advisory lock, taken on one dedicated connection per node. When a node
 *   dies its session ends and PostgreSQL releases its locks at once (a
 *   machine that vanishes is found dead by TCP keepalives within about 10 s,
 *   on this connection and on every one of its pool, so its batch
 *   transactions end too). Standbys try to take each lock every `retryMs`.
 *   A former leader's transaction that still holds the lease row once the
 *   lock is free (its node hangs, or its connection still looks open to the
 *   server) and has sat idle longer than a lock wait is ended by the node
 *   that took the lock, after one raise of the epoch failed on it.
 * - **Fencing**: the node that takes a lock raises the part's `epoch` in
 *   `es.leases`. A part checks its epoch inside every batch transaction
 *   (`Fence.hold`, which also makes a new leader's raise wait for that
 *   transaction), with every checkpoint, and before every side effect
 *   (`Fence.check`). A node that lost its lock without noticing (its lock
 *   connection cut while the others work on) can therefore never apply,
 *   deliver or move a checkpoint once another node leads.
 *
 * The same connection listens for `NOTIFY`, so standbys learn the leader's
 * read-model checkpoint as it commits.
 */
export class LeaseLostError extends Error {
  constructor(readonly part: string) {
    super(`this node no longer leads ${part}`);
  }
}

/** The proof that this node leads a part; every side effect of the part goes through it. */
export interface Fence {
  readonly part: string;
  /** Aborted when this node stops leading the part. */
  readonly signal: AbortSignal;
  /** Throws `LeaseLostError` unless this node still leads the part (one small query; nothing in a single process). */
  check(): Promise<void>;
  /**
   * Inside a transaction: throws `LeaseLostError` unless this node still leads,
   * and keeps the lease row share-locked until the transaction ends, so a new
   * leader starts only after it committed or rolled back.
   */
  hold(tx: Transaction<any>): Promise<void>;
}

/** A single process leads everything, always. */
export const SOLE: Fence = {
  part: '*',
  signal: new AbortController().signal,
  check: async () => {},
  hold: async () => {},
};

/** A part that runs only where it leads: `lead` when this node takes it, `standDown` when it loses or gives it up. */
export interface LeaderRole {
  lead(fence: Fence): Promise<void>;
  standDown(): Promise<void>;
}

export interface LeasesOptions {
  /** The shared database; the dedicated connection is opened on it. */
  url: string;
  db: Kysely<any>;
  /** This node's name, recorded as the holder. */
  node: string;
  log: Logger;
  /** How often a standby tries to take a lock, and the holder checks its connection. */
  retryMs?: number;
}

interface Entry {
  part: string;
  role: LeaderRole;
  fence: EpochFence | null;
  /** A `lead` or `standDown` under way: nothing else happens to the part meanwhile. */
  busy: Promise<void> | null;
  /** Raises of the epoch that failed in a row (a former leader's transaction held the row). */
  failedRaises: number;
}

export interface LeasesStatus {
  /** The dedicated connection is up. */
  connected: boolean;
  /** Why not, when it is down. */
  waiting?: string;
  leading: string[];
  standby: string[];
}

const CHANNEL = 'es_checkpoints';

class EpochFence implements Fence {
  private readonly controller = new AbortController();

  constructor(
    readonly part: string,
    readonly epoch: string,
    private readonly db: Kysely<any>,
    private readonly lost: (fence: EpochFence) => void,
  ) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  abort(): void {
    this.controller.abort(new LeaseLostError(this.part));
  }

  async check(): Promise<void> {
    if (this.signal.aborted) throw new LeaseLostError(this.part);
    const { rows } = await sql<{ epoch: string }>`SELECT epoch::text AS epoch FROM es.leases WHERE name = ${this.part}`.execute(this.db);
    if (rows[0]?.epoch !== this.epoch) this.fail();
  }

  async hold(tx: Transaction<any>): Promise<void> {
    if (this.signal.aborted) throw new LeaseLostError(this.part);
    const { rows } = await sql`SELECT 1 FROM es.leases WHERE name = ${this.part} AND epoch = ${this.epoch}::bigint FOR SHARE`.execute(tx);
    if (rows.length === 0) this.fail();
  }

  private fail(): never {
    this.lost(this);
    throw new LeaseLostError(this.part);
  }
}

export class Leases {
  private client: pg.Client | null = null;
  private queue: Promise<unknown> = Promise.resolve();
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<(payload: string) => void>();
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  private waiting: string | undefined = 'not connected yet';
  private readonly retryMs: number;
  /** The server's process of the leadership connection (whose raises a former leader's transaction can hold back). */
  private pid = 0;

  constructor(private readonly options: LeasesOptions) {
    this.retryMs = options.retryMs ?? 2000;
  }

  get node(): string {
    return this.options.node;
  }

  /** Opens the dedicated connection (or keeps trying, in the background, when the database does not answer yet). */
  async start(): Promise<void> {
    await this.tick();
    const loop = () => {
      if (this.stopped) return;
      // ±25 % jitter, so the standbys of a dead node do not all ask at the same instant.
      this.timer = setTimeout(() => {
        this.ticking = this.tick().finally(() => {
          this.ticking = null;
          loop();
        });
      }, Math.round(this.retryMs * (0.75 + Math.random() * 0.5)));
      this.timer.unref();
    };
    loop();
  }

  /** Gives up every part (each stands down first, then its lock is released) and closes the connection. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    await Promise.all([...this.entries.keys()].map((part) => this.unregister(part)));
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => undefined);
  }

  /** Runs `role` whenever this node leads `part`. Tried at once, then every `retryMs`. */
  register(part: string, role: LeaderRole): void {
    if (this.entries.has(part)) throw new Error(`${part} is registered twice`);
    this.entries.set(part, { part, role, fence: null, busy: null, failedRaises: 0 });
    if (!this.stopped && this.client) void this.tryTake(this.entries.get(part)!);
  }

  /** Stops running `part` here: it stands down, and its lock goes to another node. */
  async unregister(part: string): Promise<void> {
    const entry = this.entries.get(part);
    if (!entry) return;
    this.entries.delete(part);
    // A take under way, then the `lead` it started, if any.
    while (entry.busy) await entry.busy;
    if (entry.fence) {
      entry.fence.abort();
      entry.fence = null;
      await entry.role.standDown().catch((err) => this.options.log.error({ err, part }, 'standing down failed'));
      await this.query(this.client, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(part)]).catch(() => undefined);
    }
  }

  /** `NOTIFY es_checkpoints` payloads (`<name> <commit> <prepare>`), as they commit anywhere in the cluster. */
  onCheckpoint(listener: (payload: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  status(): LeasesStatus {
    const leading: string[] = [];
    const standby: string[] = [];
    for (const e of this.entries.values()) (e.fence ? leading : standby).push(e.part);
    return { connected: this.client !== null, ...(this.client ? {} : { waiting: this.waiting }), leading: leading.sort(), standby: standby.sort() };
  }

  leads(part: string): boolean {
    return this.entries.get(part)?.fence != null;
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    if (!this.client) {
      await this.connect();
      if (!this.client) return;
    } else {
      // The connection's own 'error' or 'end' may drop it while the heartbeat waits: the one asked is the one dropped.
      const client = this.client;
      try {
        await this.query(client, 'SELECT 1');
      } catch (err) {
        this.dropped(client, err as Error);
        return;
      }
    }
    await Promise.all([...this.entries.values()].filter((e) => !e.fence && !e.busy).map((e) => this.tryTake(e)));
  }

  private async connect(): Promise<void> {
    const { url, node, log } = this.options;
    const client = new pg.Client({ connectionString: url, application_name: `platform leases ${node}`.slice(0, 63), keepAlive: true, keepAliveInitialDelayMillis: 5000, query_timeout: 10_000 });
    client.on('error', (err) => this.dropped(client, err));
    client.on('end', () => this.dropped(client, new Error('the database closed the connection')));
    client.on('notification', (n) => {
      if (n.channel !== CHANNEL || !n.payload) return;
      for (const listener of this.listeners) listener(n.payload);
    });
    try {
      await client.connect();
      // The server finds a vanished node within about 10 s and releases its locks; a lock wait never outlasts a heartbeat.
      await client.query(`SET tcp_keepalives_idle = 5; SET tcp_keepalives_interval = 2; SET tcp_keepalives_count = 3; SET lock_timeout = '5s'; LISTEN ${CHANNEL}`);
      this.pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    } catch (err) {
      client.removeAllListeners('end');
      client.on('error', () => undefined);
      await client.end().catch(() => undefined);
      const why = `the database does not answer: ${(err as Error).message}`;
      if (this.waiting !== why) log.error({ err }, 'cluster: waiting for PostgreSQL to take or keep leadership');
      this.waiting = why;
      return;
    }
    this.client = client;
    this.waiting = undefined;
    log.info({ node }, 'cluster: leadership connection open; standing by for every leader-only part until its lock is free');
  }

  /** The dedicated connection is gone: so are this node's locks; every part it led stands down. */
  /**
   * A query on the leases' connection, after those already sent: the parts
   * take and release their locks concurrently, and one connection runs one
   * query at a time (pg 9 will refuse a query sent while another runs).
   */
  private query<R extends pg.QueryResultRow = pg.QueryResultRow>(client: pg.Client | null, text: string, values?: unknown[]): Promise<pg.QueryResult<R>> {
    if (!client) return Promise.reject(new Error('no connection to the database'));
    const result = this.queue.then(() => client.query<R>(text, values));
    this.queue = result.catch(() => undefined);
    return result;
  }

  /**
   * Ends the sessions that hold the raise of `part` back on the leadership connection and have sat idle
   * in their transaction for longer than a lock wait. This node holds the part's lock, so they belong to
   * a node that no longer does: a batch whose node vanished (its lock connection found dead while that one
   * still looks open to the server) or hangs. Their transaction rolls back; what it held is done again by
   * the new leader.
   */
  private async endStaleHolders(client: pg.Client, part: string): Promise<void> {
    const pid = this.pid;
    if (this.client !== client || !pid) return;
    try {
      const { rows } = await sql<{ pid: number; application_name: string; idle: number }>`
        SELECT pid, application_name, extract(epoch FROM now() - state_change)::float8 AS idle, pg_terminate_backend(pid) AS ended
        FROM pg_stat_activity
        WHERE pid = ANY(pg_blocking_pids(${pid}::int))
          AND state IN ('idle in transaction', 'idle in transaction (aborted)')
          AND state_change < now() - make_interval(secs => ${STALE_IDLE_SECONDS})`.execute(this.options.db);
      if (rows.length) this.options.log.warn({ part, sessions: rows.map((r) => ({ pid: r.pid, application: r.application_name, idleSeconds: Math.round(r.idle) })) }, 'cluster: ended a former leader\'s transactions that held the lease back');
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message, part }, 'cluster: could not end the transactions that hold the lease back');
    }
  }

  private dropped(client: pg.Client, err: Error): void {
    if (this.client !== client) return;
    this.client = null;
    this.waiting = `lost the leadership connection: ${err.message}`;
    client.removeAllListeners('end');
    client.on('error', () => undefined);
    void client.end().catch(() => undefined);
    const led = [...this.entries.values()].filter((e) => e.fence);
    this.options.log.error({ err, parts: led.map((e) => e.part) }, 'cluster: lost the database connection that holds leadership; standing down and waiting for PostgreSQL');
    for (const entry of led) this.lose(entry);
  }

  private lose(entry: Entry): void {
    const fence = entry.fence;
    if (!fence) return;
    fence.abort();
    entry.fence = null;
    // After a `lead` still under way, if any: a part stands down only once it has started.
    const run = (entry.busy ?? Promise.resolve()).then(() => entry.role.standDown()).catch((err) => this.options.log.error({ err, part: entry.part }, 'standing down failed'));
    this.occupy(entry, run);
  }

  /** Marks the part busy until `run` settles. */
  private occupy(entry: Entry, run: Promise<void>): void {
    const busy: Promise<void> = run.then(() => {
      if (entry.busy === busy) entry.busy = null;
    });
    entry.busy = busy;
  }

  /**
   * Takes the part if its lock is free. The part is busy from the call on, before anything is awaited: a
   * registration and a heartbeat that both find it free take it once (the advisory lock is re-entrant on
   * the one session, so a second take would succeed, lead the part twice and leave a lock held at stop).
   */
  private tryTake(entry: Entry): Promise<void> {
    const client = this.client;
    if (!client || entry.fence || entry.busy || this.stopped) return Promise.resolve();
    const taking = this.take(entry, client);
    this.occupy(entry, taking);
    return taking;
  }

  private async take(entry: Entry, client: pg.Client): Promise<void> {
    let epoch: string;
    try {
      const { rows } = await this.query<{ ok: boolean }>(client, 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [lockKey(entry.part)]);
      if (!rows[0]?.ok) return;
      // Unregistered, dropped or (by no path but this one) already led meanwhile: the lock taken again is given back.
      if (!this.entries.has(entry.part) || this.client !== client || entry.fence) {
        await this.query(client, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(entry.part)]).catch(() => undefined);
        return;
      }
      // A former leader's transaction that still holds the row and has sat idle longer than a lock wait is ended
      // (its node lost the lock, so it may not commit anyway), once a raise has already failed on it.
      const watch = entry.failedRaises > 0 ? setTimeout(() => void this.endStaleHolders(client, entry.part), STALE_CHECK_MS) : null;
      try {
        const raised = await this.query<{ epoch: string }>(
          client,
          `INSERT INTO es.leases AS l (name, holder, epoch) VALUES ($1, $2, 1)
           ON CONFLICT (name) DO UPDATE SET epoch = l.epoch + 1, holder = EXCLUDED.holder, taken_at = now()
           RETURNING epoch::text AS epoch`,
          [entry.part, this.options.node],
        );
        epoch = raised.rows[0]!.epoch;
        entry.failedRaises = 0;
      } catch (err) {
        // The old leader's last transaction still holds the row (lock_timeout): let go and try again later.
        entry.failedRaises++;
        await this.query(client, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(entry.part)]).catch(() => undefined);
        throw err;
      } finally {
        if (watch) clearTimeout(watch);
      }
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message, part: entry.part }, 'cluster: taking leadership failed; trying again');
      return;
    }
    if (!this.entries.has(entry.part) || this.client !== client) {
      // Unregistered while the epoch was raised (the lock is given back), or the connection, and the lock with it, is gone.
      if (this.client === client) await this.query(client, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(entry.part)]).catch(() => undefined);
      return;
    }
    const fence = new EpochFence(entry.part, epoch, this.options.db, (f) => {
      if (entry.fence === f) {
        this.options.log.error({ part: entry.part, epoch: f.epoch }, 'cluster: another node took over this part; standing down');
        this.lose(entry);
      }
    });
    entry.fence = fence;
    this.options.log.info({ part: entry.part, epoch, node: this.options.node }, 'cluster: leading');
    const run = entry.role.lead(fence).then(
      () => undefined,
      async (err) => {
        // Could not start here (the database went away meanwhile): let another node, or a later try, have it.
        this.options.log.error({ err, part: entry.part }, 'cluster: starting as leader failed; giving the part up');
        if (entry.fence === fence) {
          fence.abort();
          entry.fence = null;
          await entry.role.standDown().catch(() => undefined);
          await this.query(this.client, 'SELECT pg_advisory_unlock(hashtextextended($1, 0))', [lockKey(entry.part)]).catch(() => undefined);
        }
      },
    );
    this.occupy(entry, run);
  }
}

const lockKey = (part: string) => `platform-lease:${part}`;

/** How long into a raise the sessions that hold it back are looked at. */
const STALE_CHECK_MS = 1000;
/** A session idle inside its transaction for longer than this (the raise's own lock wait) while it holds a lease row back is a former leader's, stuck or orphaned. */
const STALE_IDLE_SECONDS = 5;

/** The payload `NOTIFY`d with a checkpoint, inside the transaction that stores it. */
export async function notifyCheckpoint(tx: Transaction<any>, name: string, commit: bigint, prepare: bigint): Promise<void> {
  await sql`SELECT pg_notify(${CHANNEL}, ${`${name} ${commit} ${prepare}`})`.execute(tx);
}
