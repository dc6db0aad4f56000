import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Config } from '../api/config.js';
import type { EventStore } from '../domain/eventstore/port.js';
import type { SubscriberCluster } from '../domain/eventstore/subscriber.js';
import type { Database } from '../projections/database.js';
import type { ProjectionRunner } from '../projections/runner.js';
import type { Principals } from '../projections/principals.js';
import type { Fetch } from './outbound.js';

/**
 * What a reactor is built from: the composition root's dependencies that
 * follow the event log and act on it, without the HTTP front's (its token
 * secret, its named locks). `Deps` (api/deps.ts) extends it.
 */
export interface ReactorDeps {
  config: Config;
  db: Kysely<Database>;
  store: EventStore;
  projections: ProjectionRunner;
  log: Logger;
  clock: () => Date;
  /** Who a user is to the checks (enabled, roles); follows the users read model. */
  principals: Principals;
  /** Cluster mode (`REDIS_URL`): leadership of the subscribers and this node's indexes; absent on a single process. */
  cluster?: SubscriberCluster | null;
  /** HTTP requests to URLs users write (channels, rules, network servers), within `OUTBOUND_TARGETS`. */
  outbound: Fetch;
}
