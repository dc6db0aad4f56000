import { createRequire } from 'node:module';
import { Readable } from 'node:stream';
import type { Redis } from 'ioredis';

const require = createRequire(import.meta.url);

/**
 * Bounds on persistent MQTT sessions (`clean: false`). MQTT 3.1.1 keeps such a
 * session, and queues every QoS 1 message for it, until its client id connects
 * with `clean: true`; a consumer that never comes back would grow the broker's
 * store for ever. So:
 *
 * - a session holds at most `queue` messages: one more drops the oldest, and
 *   the consumer gets the newest, in order, when it is back;
 * - a session whose client has been away for `expiryMs` ends, as if its client
 *   had connected with `clean: true`: its subscriptions and queue are deleted,
 *   and its next connection gets `sessionPresent: false`. 0: never.
 */
export interface SessionLimits {
  queue: number;
  expiryMs: number;
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { queue: 10_000, expiryMs: 24 * 3600 * 1000 };

/** An aedes persistence whose session queues are bounded, and can be emptied by the broker when a session ends. */
export interface BoundedPersistence {
  /** Deletes what is queued for a session. */
  dropQueue(clientId: string): Promise<void>;
  /** Told how many of a session's oldest messages a full queue dropped. */
  dropped: (clientId: string, count: number) => void;
  cleanSubscriptions(client: { id: string }): Promise<void>;
  cleanIncoming?(client: { id: string }): Promise<void>;
  /** The sessions a store kept across restarts (Redis), which may predate their timing; none in memory. */
  stored?(): Promise<string[]>;
}

/** When each persistent session's client was last seen connected, shared by the nodes of a cluster. */
export interface LastSeen {
  /** The sessions were seen at `at` (connected, or leaving). */
  seen(ids: string[], at: number): Promise<void>;
  /** Sessions the store has no time for yet count from `at` (those made before sessions were timed). */
  adopt(ids: string[], at: number): Promise<void>;
  /**
   * Takes up to `max` sessions last seen at or before `cutoff` out of the
   * store and returns them: each is returned to one caller only, so of several
   * nodes sweeping at once one ends each session.
   */
  claim(cutoff: number, max: number): Promise<string[]>;
  forget(id: string): Promise<void>;
}

type Packet = { brokerId: string; brokerCounter: number; messageId?: number; cmd?: string };
const MemoryPersistence = require('aedes-persistence/asyncPersistence.js') as new (opts?: object) => object;
const PacketCopy = require('aedes-persistence').Packet as new (original: object) => Packet;
const { CallBackPersistence } = require('aedes-persistence/callBackPersistence.js') as { CallBackPersistence: new (factory: () => object) => object };

/**
 * The form aedes takes a persistence in: the stores here are aedes's promise
 * API, which aedes reaches through this adapter (it turns their generators
 * into streams).
 */
export const forAedes = (store: BoundedPersistence): unknown => new CallBackPersistence(() => store);

type Subscription = { topic: string };
type SubscriptionStore = { addSubscriptions(client: object, subs: Subscription[]): Promise<void> };

/**
 * A persistent session keeps only the subscriptions its identity may hold.
 * aedes stores a SUBSCRIBE packet's whole topic list once for each topic it
 * granted, the refused ones included: a refused topic would come back,
 * unchecked, when the session resumes, and a packet of n topics cost n
 * stores of n topics. So the list is stored once per packet, and only the
 * topics `may` allows (the broker's own subscribe rule).
 */
export function keepOnlyAllowed(store: BoundedPersistence, may: (client: object, topic: string) => boolean): void {
  const target = store as unknown as SubscriptionStore;
  const add = target.addSubscriptions.bind(target);
  const stored = new WeakSet<Subscription[]>();
  target.addSubscriptions = (client, subs) => {
    if (stored.has(subs)) return Promise.resolve();
    stored.add(subs);
    const allowed = subs.filter((s) => may(client, s.topic));
    return allowed.length ? add(client, allowed) : Promise.resolve();
  };
}

/**
 * The single process's session store: aedes-persistence's memory store, with
 * its queues replaced. Each session's queue is a map from the message's broker
 * key to the message, in the order queued, so the oldest is dropped at once
 * and an update or acknowledgement finds its message without a scan (the
 * stock queue is an array searched from its start for every delivery).
 */
export class BoundedMemoryPersistence extends (MemoryPersistence as new (opts?: object) => {
  cleanSubscriptions(client: { id: string }): Promise<void>;
  cleanIncoming(client: { id: string }): Promise<void>;
}) implements BoundedPersistence {
  readonly #queues = new Map<string, Map<string, Packet>>();
  /** Per session, the message each packet id was last given to. */
  readonly #ids = new Map<string, Map<number, string>>();
  dropped: (clientId: string, count: number) => void = () => undefined;

  constructor(private readonly limit: number) {
    super();
  }

  #queue(clientId: string): Map<string, Packet> {
    let queue = this.#queues.get(clientId);
    if (!queue) this.#queues.set(clientId, (queue = new Map()));
    return queue;
  }

  #enqueue(clientId: string, packet: Packet): void {
    const queue = this.#queue(clientId);
    const copy = new PacketCopy(packet);
    queue.set(`${copy.brokerId}:${copy.brokerCounter}`, copy);
    if (queue.size <= this.limit) return;
    let over = queue.size - this.limit;
    const count = over;
    for (const key of queue.keys()) {
      queue.delete(key);
      if (--over === 0) break;
    }
    this.dropped(clientId, count);
  }

  async outgoingEnqueue(sub: { clientId: string }, packet: Packet): Promise<void> {
    this.#enqueue(sub.clientId, packet);
  }

  async outgoingEnqueueCombi(subs: { clientId: string }[], packet: Packet): Promise<void> {
    for (const sub of subs) this.#enqueue(sub.clientId, packet);
  }

  /**
   * A message given its packet id for a delivery. A message the queue has
   * dropped meanwhile (it was full) is still delivered, only no longer kept:
   * failing here would close the consumer's connection.
   */
  async outgoingUpdate(client: { id: string }, packet: Packet): Promise<void> {
    const queue = this.#queue(client.id);
    let ids = this.#ids.get(client.id);
    if (!ids) this.#ids.set(client.id, (ids = new Map()));
    if (packet.cmd === 'pubrel') {
      // QoS 2's release takes the place of the message it releases.
      const key = packet.messageId !== undefined ? ids.get(packet.messageId) : undefined;
      if (key !== undefined && queue.has(key)) queue.set(key, packet);
      return;
    }
    const key = `${packet.brokerId}:${packet.brokerCounter}`;
    const queued = queue.get(key);
    if (!queued) {
      // Its acknowledgement must not clear what the packet id named on an earlier connection.
      if (packet.messageId !== undefined) ids.delete(packet.messageId);
      return;
    }
    queued.messageId = packet.messageId;
    if (packet.messageId !== undefined) ids.set(packet.messageId, key);
  }

  async outgoingClearMessageId(client: { id: string }, packet: { messageId?: number }): Promise<Packet | undefined> {
    const ids = this.#ids.get(client.id);
    if (!ids || packet.messageId === undefined) return undefined;
    const key = ids.get(packet.messageId);
    if (key === undefined) return undefined;
    ids.delete(packet.messageId);
    const queue = this.#queues.get(client.id);
    const queued = queue?.get(key);
    if (!queued) return undefined;
    queue!.delete(key);
    if (queue!.size === 0) this.#queues.delete(client.id);
    return queued;
  }

  outgoingStream(client: { id: string }): Readable {
    return Readable.from([...(this.#queues.get(client.id)?.values() ?? [])]);
  }

  async dropQueue(clientId: string): Promise<void> {
    this.#queues.delete(clientId);
    this.#ids.delete(clientId);
  }
}

/**
 * Keeps the newest `ARGV[1]` entries of a session's queue in
 * aedes-persistence-redis (a list of keys of stored messages) and releases
 * the messages of the entries it removes: a message kept for several sessions
 * is deleted with the last of them, as the store does on an acknowledgement.
 * Returns how many entries it removed. The message keys are not declared in
 * KEYS: the platform's Redis is one server, not a Redis Cluster.
 */
const TRIM = `
local keep = tonumber(ARGV[1])
local n = redis.call('LLEN', KEYS[1])
if n <= keep then return 0 end
local gone = redis.call('LRANGE', KEYS[1], 0, n - keep - 1)
if keep == 0 then redis.call('DEL', KEYS[1]) else redis.call('LTRIM', KEYS[1], n - keep, -1) end
for _, key in ipairs(gone) do
  if string.sub(key, 1, 7) == 'packet:' then
    local count = key .. ':offlineCount'
    if redis.call('DECR', count) <= 0 then redis.call('DEL', key, count) end
  end
end
return #gone`;

type RedisPersistenceClass = new (opts: { conn: Redis; maxSessionDelivery?: number; packetTTL?: () => number }) => {
  outgoingEnqueueCombi(subs: { clientId: string }[], packet: Packet): Promise<void>;
  cleanSubscriptions(client: { id: string }): Promise<void>;
  cleanIncoming(client: { id: string }): Promise<void>;
};
const RedisPersistence = require('aedes-persistence-redis/asyncPersistence.js') as RedisPersistenceClass;

/** aedes-persistence-redis's key of a session's queue. */
const queueKey = (clientId: string) => `outgoing:${encodeURIComponent(clientId)}`;
/** aedes-persistence-redis's set of the sessions that have subscriptions. */
const SESSIONS_KEY = 'clients';

type WithTrim = Redis & { trimSessionQueue(key: string, keep: number): Promise<number> };

/**
 * A cluster's session store: aedes-persistence-redis, whose queues are trimmed
 * to the limit after each message queued, and which sends a reconnecting
 * consumer its whole queue (the store's default is the first 1,001). Stored
 * messages expire with the session expiry, so a message whose entry was
 * trimmed while it was in flight cannot outlive it.
 */
export class BoundedRedisPersistence extends RedisPersistence implements BoundedPersistence {
  readonly #conn: WithTrim;
  dropped: (clientId: string, count: number) => void = () => undefined;

  constructor(conn: Redis, private readonly limits: SessionLimits) {
    const ttl = Math.ceil(limits.expiryMs / 1000);
    super({ conn, maxSessionDelivery: limits.queue, ...(ttl > 0 ? { packetTTL: () => ttl } : {}) });
    if (!('trimSessionQueue' in conn)) conn.defineCommand('trimSessionQueue', { numberOfKeys: 1, lua: TRIM });
    this.#conn = conn as WithTrim;
  }

  override async outgoingEnqueueCombi(subs: { clientId: string }[], packet: Packet): Promise<void> {
    await super.outgoingEnqueueCombi(subs, packet);
    if (!subs || subs.length === 0) return;
    const trimmed = await Promise.all(subs.map((s) => this.#conn.trimSessionQueue(queueKey(s.clientId), this.limits.queue)));
    trimmed.forEach((n, i) => n > 0 && this.dropped(subs[i]!.clientId, n));
  }

  async dropQueue(clientId: string): Promise<void> {
    await this.#conn.trimSessionQueue(queueKey(clientId), 0);
  }

  /** The sessions with subscriptions in the store. */
  stored(): Promise<string[]> {
    return this.#conn.smembers(SESSIONS_KEY);
  }
}

export class MemoryLastSeen implements LastSeen {
  readonly #at = new Map<string, number>();
  async seen(ids: string[], at: number): Promise<void> {
    for (const id of ids) this.#at.set(id, at);
  }
  async adopt(ids: string[], at: number): Promise<void> {
    for (const id of ids) if (!this.#at.has(id)) this.#at.set(id, at);
  }
  async claim(cutoff: number, max: number): Promise<string[]> {
    const out: string[] = [];
    for (const [id, at] of this.#at) {
      if (out.length >= max) break;
      if (at <= cutoff) out.push(id);
    }
    for (const id of out) this.#at.delete(id);
    return out;
  }
  async forget(id: string): Promise<void> {
    this.#at.delete(id);
  }
}

/** Claims the oldest sessions at or before ARGV[1], at most ARGV[2], removing them in the same step. */
const CLAIM = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then redis.call('ZREM', KEYS[1], unpack(ids)) end
return ids`;

type WithClaim = Redis & { claimSessions(key: string, cutoff: number, max: number): Promise<string[]> };

/** Last-seen times in a sorted set of Redis, so a session left on one node expires whichever node sweeps. */
export class RedisLastSeen implements LastSeen {
  static readonly KEY = 'platform:mqtt:sessions:seen';
  readonly #conn: WithClaim;
  constructor(conn: Redis) {
    if (!('claimSessions' in conn)) conn.defineCommand('claimSessions', { numberOfKeys: 1, lua: CLAIM });
    this.#conn = conn as WithClaim;
  }
  async seen(ids: string[], at: number): Promise<void> {
    if (ids.length > 0) await this.#conn.zadd(RedisLastSeen.KEY, ...ids.flatMap((id) => [at, id]));
  }
  async adopt(ids: string[], at: number): Promise<void> {
    if (ids.length > 0) await this.#conn.zadd(RedisLastSeen.KEY, 'NX', ...ids.flatMap((id) => [at, id]));
  }
  claim(cutoff: number, max: number): Promise<string[]> {
    return this.#conn.claimSessions(RedisLastSeen.KEY, cutoff, max);
  }
  async forget(id: string): Promise<void> {
    await this.#conn.zrem(RedisLastSeen.KEY, id);
  }
}

/**
 * How often the broker sums up what full queues dropped and, with an expiry,
 * times its sessions and ends those away too long: a quarter of the expiry,
 * from 250 ms to a minute.
 */
export const sweepInterval = (expiryMs: number) => (expiryMs > 0 ? Math.min(60_000, Math.max(250, Math.floor(expiryMs / 4))) : 60_000);
/** Sessions ended per claim; a sweep claims until none is left. */
const CLAIM_BATCH = 100;
/** Sessions named in one process log line about full queues, and told of it in their owner's log per sweep. */
const NAMED = 10;
const TOLD = 100;

type KeptClient = { id: string; clean: boolean };
interface KeptBroker {
  clients: Record<string, KeptClient>;
  on(event: 'client' | 'clientDisconnect', listener: (client: KeptClient) => void): unknown;
  off(event: 'client' | 'clientDisconnect', listener: (client: KeptClient) => void): unknown;
}

export interface SessionKeeping {
  persistence: BoundedPersistence;
  seen: LastSeen;
  limits: SessionLimits;
  log: { info(o: object, msg: string): void; warn(o: object, msg: string): void; error(o: object, msg: string): void };
  metrics?: { dropped: { inc(n?: number): void }; expired: { inc(n?: number): void } } | null;
  /** Tells a session's owner (its credentials set's or app's log) what became of it. */
  tell?: (session: string, what: { dropped: number } | { ended: true }) => void;
  now?: () => number;
}

/**
 * Applies the session limits on a broker: counts what full queues drop and
 * sums it up once a sweep, times each persistent session from its connection
 * and departure (and, every sweep, its connection still open, so a session on
 * a live node never looks abandoned while one on a node that died ages from
 * its last sweep), and ends the sessions away longer than the expiry.
 *
 * A client that reconnects in the very sweep that ends its session may be
 * told its session is present while its subscriptions are being deleted; its
 * connection keeps receiving, and its next one gets `sessionPresent: false`,
 * on which a consumer subscribes again (docs/mqtt.md).
 */
export function keepSessions(broker: KeptBroker, k: SessionKeeping): { stop(): Promise<void> } {
  const now = k.now ?? Date.now;
  const failed = (what: string) => (err: unknown) => k.log.error({ err }, `MQTT sessions: ${what} failed`);
  const expires = k.limits.expiryMs > 0;

  // Full queues: counted at once, summed up at each sweep.
  const full = new Map<string, number>();
  k.persistence.dropped = (clientId, count) => {
    k.metrics?.dropped.inc(count);
    full.set(clientId, (full.get(clientId) ?? 0) + count);
  };
  const sumUp = () => {
    if (full.size === 0) return;
    const named = [...full.entries()].slice(0, NAMED).map(([session, dropped]) => ({ session, dropped }));
    k.log.warn({ sessions: named, more: Math.max(0, full.size - NAMED), limit: k.limits.queue }, 'MQTT sessions: queues full while their consumers are away; their oldest messages were dropped');
    for (const [session, dropped] of [...full.entries()].slice(0, TOLD)) k.tell?.(session, { dropped });
    full.clear();
  };

  const connected = (client: KeptClient) => {
    if (client.clean) k.seen.forget(client.id).catch(failed('forgetting a clean session'));
    else k.seen.seen([client.id], now()).catch(failed('timing a session'));
  };
  const left = (client: KeptClient) => {
    if (!client.clean) k.seen.seen([client.id], now()).catch(failed('timing a session'));
  };
  if (expires) {
    broker.on('client', connected);
    broker.on('clientDisconnect', left);
  }

  let adopted = false;
  let running: Promise<void> | null = null;
  const expire = async () => {
    const at = now();
    if (!adopted && k.persistence.stored) {
      // Sessions stored before they were timed start counting now.
      await k.seen.adopt(await k.persistence.stored(), at);
      adopted = true;
    }
    const open = Object.values(broker.clients).filter((c) => !c.clean).map((c) => c.id);
    await k.seen.seen(open, at);
    for (;;) {
      const claimed = await k.seen.claim(at - k.limits.expiryMs, CLAIM_BATCH);
      for (const id of claimed) {
        // Connected here since the times above were read: still alive.
        if (broker.clients[id]) {
          await k.seen.seen([id], now());
          continue;
        }
        try {
          await k.persistence.dropQueue(id);
          await k.persistence.cleanSubscriptions({ id });
          await k.persistence.cleanIncoming?.({ id });
        } catch (err) {
          // Back into the store as already expired, for the next sweep to end.
          await k.seen.seen([id], at - k.limits.expiryMs).catch(() => undefined);
          throw err;
        }
        k.metrics?.expired.inc();
        k.log.info({ session: id, awayMs: k.limits.expiryMs }, 'MQTT session ended: its client has been away longer than the session expiry');
        k.tell?.(id, { ended: true });
      }
      if (claimed.length < CLAIM_BATCH) return;
    }
  };
  const sweep = () => {
    running ??= (async () => {
      sumUp();
      if (expires) await expire();
    })()
      .catch(failed('sweeping'))
      .finally(() => (running = null));
    return running;
  };
  const timer = setInterval(() => void sweep(), sweepInterval(k.limits.expiryMs));
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      broker.off('client', connected);
      broker.off('clientDisconnect', left);
      await running;
      sumUp();
    },
  };
}
