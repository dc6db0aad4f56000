import { Redis, type RedisOptions } from 'ioredis';
import MQEmitterRedis from 'mqemitter-redis';
import type { Logger } from 'pino';
import type { Remembered } from './pipeline.js';
import type { BrokerBackends } from './broker.js';
import { BoundedRedisPersistence, RedisLastSeen, type SessionLimits } from './sessions.js';

/**
 * What the nodes of a cluster share through Redis (`REDIS_URL`):
 *
 * - the broker's message bus (`mqemitter-redis`): what the platform publishes
 *   (output topics, downlinks to devices) reaches subscribers on every node,
 *   and aedes's own coordination (a client id connecting on one node closes
 *   its older connection on another) crosses nodes;
 * - the broker's persistence (`aedes-persistence-redis`): subscriptions and
 *   QoS 1 messages of persistent sessions (`clean: false`), so a consumer
 *   that reconnects to another node finds its session and what was queued,
 *   and when each session's client was last seen, so whichever node sweeps
 *   ends a session away longer than its expiry (`ingest/sessions.ts`);
 * - the ingest pipeline's redelivery memory (`SharedRedeliveries`), so a
 *   QoS 1 message stored through one node and sent again to another after a
 *   reconnect is stored once;
 * - the claims rate limiter's buckets.
 *
 * Device messages are never put on the bus: the broker hands them to the
 * ingest pipeline and forwards them to no subscriber (see `authorizeForward`
 * in `broker.ts`), so sending them to the other nodes would only cost.
 *
 * While Redis is away the platform keeps taking device messages (they are
 * stored in PostgreSQL, which is what a PUBACK waits for); publishes to
 * consumers wait for Redis (the output reactor retries its batch, its
 * checkpoint does not move), and health names Redis until it is back.
 */
export interface RedisLink {
  /** The broker's cluster back-ends, for `Aedes.createBroker`. */
  backends: BrokerBackends;
  redeliveries: SharedRedeliveries;
  /** Runs a Lua script on the shared connection (fails fast while Redis is away). */
  command: Redis;
  /** Every connection is up. */
  readonly up: boolean;
  /** What this node waits for, while not `up`. */
  readonly waiting: string | undefined;
  /**
   * At a stop while Redis is away: stops reconnecting, so that every command
   * queued for Redis (a publish of the output reactor, a session write of the
   * broker) fails now instead of holding the stop until Redis is back. What
   * those commands would have written is lost as it is when a node is killed.
   * Nothing happens while every connection is up.
   */
  letGo(): Promise<void>;
  close(): Promise<void>;
}

/**
 * How long Redis keeps what a node stored, for a re-send that reaches
 * another node: a device re-sends after it reconnects, within seconds of
 * losing its node. Entries go into one hash per `BUCKET_S` of the node's
 * clock, and a look-up reads the `BUCKETS` newest: an entry counts for 15 to
 * 20 minutes. A field takes Redis about 150 bytes, a key of its own about
 * 220, and a batch is recorded by one command instead of one per message.
 *
 * A bucket is deleted with `UNLINK` by the first record into the bucket
 * that retires it, which frees it on Redis's background thread: left to
 * expire, a hash of 300,000 fields blocked Redis for 180 ms. Its expiry, a
 * bucket later, only cleans up after a cluster that stopped recording.
 */
const BUCKET_S = 300;
const BUCKETS = 4;

/** How long a stop waits for the connections to Redis to end once it has let go of them. */
const LET_GO_WAIT_MS = 15_000;

export function connectRedis(url: string, log: Logger, sessions: SessionLimits): RedisLink {
  let lettingGo = false;
  const base: RedisOptions = {
    // Reconnect for ever, at most every 2 s; at a stop while Redis is away, no more. ioredis then fails every queued
    // command and ends the connection: the one way to end a connection that is waiting to reconnect (its
    // `disconnect()` then leaves the queue waiting, and `quit()` waits behind the queue).
    retryStrategy: (times) => (lettingGo ? null : Math.min(times * 200, 2000)),
    lazyConnect: false,
    connectionName: 'platform',
  };
  const connections = {
    // The bus and the persistence queue their commands while Redis is away, and send them once it is back. Commands
    // issued in one tick leave in one write (auto-pipelining, as mqemitter-redis sets on connections it makes itself):
    // the output reactor publishes a batch's messages in one go, and a write for each cost Redis about 11 µs more
    // CPU per message (docs/benchmarks.md, "Cluster mode's cost per message").
    publish: new Redis(url, { ...base, maxRetriesPerRequest: null, enableAutoPipelining: true }),
    subscribe: new Redis(url, { ...base, maxRetriesPerRequest: null }),
    persistence: new Redis(url, { ...base, maxRetriesPerRequest: null, enableAutoPipelining: true }),
    // Checks on the message path fail at once instead of waiting for Redis.
    command: new Redis(url, { ...base, enableOfflineQueue: false, commandTimeout: 1000, maxRetriesPerRequest: 1 }),
  };
  let lastError = '';
  for (const [name, conn] of Object.entries(connections)) {
    let down = false;
    conn.on('error', (err: Error) => {
      lastError = err.message;
    });
    conn.on('close', () => {
      if (down) return;
      down = true;
      log.error({ connection: name, err: lastError || undefined }, 'cluster: Redis connection lost; MQTT across nodes and shared sessions wait for it, reconnecting');
    });
    conn.on('ready', () => {
      if (!down) return;
      down = false;
      log.info({ connection: name }, 'cluster: Redis connection back');
    });
  }

  const mq = new (MQEmitterRedis as unknown as new (o: object) => { emit(packet: { clientId?: string | null }, cb?: (err?: Error) => void): void; state: NodeJS.EventEmitter; close(cb?: () => void): void })({
    pubConn: connections.publish,
    subConn: connections.subscribe,
  });
  // mqemitter-redis re-emits each connection error on `state`; unheard, that 'error' would end the process at the
  // first refused reconnect. The connections' own listeners above log the outage; the bus waits for Redis.
  mq.state.on('error', () => undefined);
  // A device's publish carries its client id and is data for the ingest alone: no subscriber on any node receives it.
  const emit = mq.emit.bind(mq);
  mq.emit = (packet, cb) => (packet.clientId != null ? cb?.() : emit(packet, cb));
  const persistence = new BoundedRedisPersistence(connections.persistence, sessions);
  // The bus's own close quits its connections and waits for them to end, which a connection already ended by
  // `letGo` never does again: once let go, the bus is closed with what is left.
  const closeBus = mq.close.bind(mq);
  mq.close = (cb?: () => void) => {
    if (!lettingGo) return closeBus(cb);
    for (const c of [connections.publish, connections.subscribe]) if (c.status !== 'end') c.disconnect();
    cb?.();
  };

  const all = Object.values(connections);
  const ended = (c: Redis) => (c.status === 'end' ? Promise.resolve() : new Promise<void>((resolve) => c.once('end', () => resolve())));
  return {
    backends: { mq, sessions: { store: persistence, seen: new RedisLastSeen(connections.persistence) } },
    redeliveries: new SharedRedeliveries(connections.command, log),
    command: connections.command,
    get up() {
      return all.every((c) => c.status === 'ready');
    },
    get waiting() {
      const down = Object.entries(connections).filter(([, c]) => c.status !== 'ready');
      return down.length ? `Redis (${down.map(([n, c]) => `${n}: ${c.status}`).join(', ')}${lastError ? `; ${lastError}` : ''})` : undefined;
    },
    async letGo() {
      const away = all.filter((c) => c.status !== 'ready' && c.status !== 'end');
      if (away.length === 0 || lettingGo) return;
      lettingGo = true;
      log.warn({ waiting: this.waiting }, 'cluster: stopping while Redis is away; what waits for it is dropped');
      // Each ends at its next attempt to reconnect, within the retry delay (2 s) and the attempt itself.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([Promise.all(away.map(ended)), new Promise((resolve) => (timer = setTimeout(resolve, LET_GO_WAIT_MS)))]);
      clearTimeout(timer);
    },
    async close() {
      await this.letGo();
      await Promise.all(all.map((c) => (c.status === 'end' ? undefined : c.quit().catch(() => c.disconnect()))));
    },
  };
}

/**
 * The ingest pipeline's redelivery memory, shared by the nodes: for each
 * QoS 1 message stored, its key (credentials set, client id, packet id), its
 * content hash and the connection that sent it (`<hash> <connection>`, a
 * field of the hash of the time it was stored). A node asks for the keys it
 * does not remember itself before storing a batch, and records what it
 * stored before the PUBACKs leave. When Redis does not answer, the node
 * decides alone (a message re-sent to another node during a Redis outage may
 * then be stored twice; none is lost).
 */
export class SharedRedeliveries {
  private warned = 0;
  /** The bucket this node recorded into last: the first record into a newer one retires the oldest. */
  private recording = 0;

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** What was stored under each key, or null; all null when Redis does not answer. */
  async get(keys: string[]): Promise<(Remembered | null)[]> {
    if (keys.length === 0) return [];
    try {
      const newest = bucketOf(this.now());
      const pipeline = this.redis.pipeline();
      for (let b = newest; b > newest - BUCKETS; b--) pipeline.hmget(bucketKey(b), ...keys);
      const buckets = ((await pipeline.exec()) ?? []).map(([err, values]) => {
        if (err) throw err;
        return values as (string | null)[];
      });
      return keys.map((_, i) => {
        // The newest bucket first: a key stored again later says who stored it last.
        const v = buckets.find((b) => b[i] != null)?.[i];
        if (v == null) return null;
        const space = v.indexOf(' ');
        return { hash: v.slice(0, space), connection: v.slice(space + 1) || null };
      });
    } catch (err) {
      this.warn(err);
      return keys.map(() => null);
    }
  }

  async put(entries: ({ key: string } & Remembered)[]): Promise<void> {
    if (entries.length === 0) return;
    try {
      const bucket = bucketOf(this.now());
      const fields: string[] = [];
      for (const e of entries) fields.push(e.key, `${e.hash} ${e.connection ?? ''}`);
      const record = this.redis
        .multi()
        .hset(bucketKey(bucket), ...fields)
        .expireat(bucketKey(bucket), (bucket + BUCKETS + 1) * BUCKET_S);
      if (bucket > this.recording) record.unlink(bucketKey(bucket - BUCKETS));
      await record.exec();
      this.recording = Math.max(this.recording, bucket);
    } catch (err) {
      this.warn(err);
    }
  }

  private warn(err: unknown): void {
    if (Date.now() - this.warned < 10_000) return;
    this.warned = Date.now();
    this.log.warn({ err: (err as Error).message }, 'cluster: Redis does not answer; redeliveries are recognised by this node alone meanwhile');
  }
}

const bucketOf = (ms: number) => Math.floor(ms / 1000 / BUCKET_S);
const bucketKey = (bucket: number) => `platform:redeliveries:${bucket}`;
