import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import { sessionLimits, type Config } from './config.js';
import type { EventStore } from '../domain/eventstore/port.js';
import { Leases } from '../domain/eventstore/leases.js';
import { loadCheckpoint, type SubscriberCluster } from '../domain/eventstore/subscriber.js';
import type { Position } from '../domain/shared/events.js';
import { ProjectionRunner, type Projection } from '../projections/runner.js';
import { NodeIndexes } from '../projections/indexes.js';
import type { Database } from '../projections/database.js';
import { connectRedis, type RedisLink } from '../ingest/cluster.js';

/**
 * One node of a cluster (`REDIS_URL` set): every platform process started
 * on the same database and the same Redis. What each node runs and what runs
 * once across the cluster is in docs/operations.md; in short:
 *
 * - on every node: HTTP, the MQTT broker (sessions and publishes shared
 *   through Redis), the ingest pipeline, and the node's in-memory indexes
 *   (`NodeIndexes`);
 * - on the node that leads each of them (`Leases`): the projection runner,
 *   every reactor, the connections to external brokers.
 */
export interface ClusterNode {
  leases: Leases;
  redis: RedisLink;
  /** Given to every reactor's subscriber. */
  subscribers: SubscriberCluster;
  /** The projection runner of this node, with the node's indexes following the log beside it. */
  runner(projections: Projection[], indexes: Projection[]): Promise<ProjectionRunner>;
  /**
   * `ready`: the node serves (a Redis outage leaves it serving: REST, ingest and the read models work
   * without Redis); `degraded`: what it serves without, named, while Redis is away.
   */
  health(): { ready: boolean; degraded: string[]; parked: number; detail: Record<string, unknown> };
  stop(): Promise<void>;
}

/** How long a start waits for Redis before giving up with a message naming it. */
const REDIS_START_WAIT_MS = 30_000;
/** How long a reactor's batch waits for this node's indexes before it is tried again. */
const INDEX_WAIT_MS = 60_000;

export async function startCluster(config: Config, databaseUrl: string, db: Kysely<Database>, store: EventStore, log: Logger): Promise<ClusterNode> {
  // Read before any index loads its state: replaying from here onto a later state changes nothing (idempotent handlers).
  const from: Position | null = await loadCheckpoint(db, 'read-models');
  const node = config.nodeName;
  const redis = connectRedis(config.redisUrl!, log, sessionLimits(config));
  const until = Date.now() + REDIS_START_WAIT_MS;
  while (!redis.up) {
    if (Date.now() > until) {
      await redis.close();
      throw new Error(`Redis at REDIS_URL does not answer (${redis.waiting ?? 'not connected'}); a node of a cluster starts once it does`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const leases = new Leases({ url: databaseUrl, db, node, log });
  await leases.start();
  log.info({ node }, 'cluster: this process is a node of a cluster (REDIS_URL); leader-only parts run where their lock is held');

  let indexes: NodeIndexes | null = null;
  const subscribers: SubscriberCluster = {
    leases,
    ready: (position) => (indexes ? indexes.waitFor(position, INDEX_WAIT_MS) : Promise.reject(new Error('the node indexes have not started'))),
  };

  return {
    leases,
    redis,
    subscribers,
    async runner(projections, nodeIndexes) {
      indexes = new NodeIndexes(store, db, nodeIndexes, log);
      await indexes.start(from);
      return new ProjectionRunner(store, db, projections, log, 'read-models', { leases, indexes });
    },
    health() {
      const lease = leases.status();
      const waiting: string[] = [];
      if (!lease.connected) waiting.push(`PostgreSQL, for leadership (${lease.waiting ?? 'not connected'})`);
      if (indexes && !indexes.healthy) waiting.push('this node\'s indexes, whose last batch failed');
      // Without Redis the node still serves REST, ingest and the read models: it stays in its load balancer.
      const degraded = redis.up ? [] : [redis.waiting ?? 'Redis'];
      return {
        ready: waiting.length === 0,
        degraded,
        parked: indexes?.parked ?? 0,
        detail: {
          node,
          // A part another node leads is not waited for: standing by is healthy.
          leading: lease.leading,
          standby: lease.standby,
          redis: redis.up,
          ...(waiting.length + degraded.length ? { waitingFor: [...waiting, ...degraded] } : {}),
        },
      };
    },
    async stop() {
      await indexes?.stop();
      await leases.stop();
      await redis.close();
    },
  };
}
