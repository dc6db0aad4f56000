import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Request } from 'express';
import type { Config } from './config.js';
import type { EventStore } from '../domain/eventstore/port.js';
import type { ProjectionRunner } from '../projections/runner.js';
import type { Database } from '../projections/database.js';
import { handle, type CommandContext, type Decider, type Handled, type HandleOptions } from '../domain/shared/decider.js';
import type { DomainEvent, Position } from '../domain/shared/events.js';
import { UnavailableError } from '../domain/shared/errors.js';
import { StoredNotVisibleError, type Locks } from './locks.js';
import { commandContext } from './http.js';
import type { Principals } from './auth/principals.js';
import type { SubscriberCluster } from '../domain/eventstore/subscriber.js';
import type { Fetch } from '../reactors/outbound.js';

/** What every capability's routes are built from; assembled once by the composition root. */
export interface Deps {
  config: Config;
  db: Kysely<Database>;
  store: EventStore;
  projections: ProjectionRunner;
  log: Logger;
  clock: () => Date;
  jwtSecret: string;
  /** Who a verified token speaks for; follows the users read model. */
  principals: Principals;
  /** Cluster mode (`REDIS_URL`): leadership of the subscribers and this node's indexes; absent on a single process. */
  cluster?: SubscriberCluster | null;
  /** HTTP requests to URLs users write (channels, rules, network servers), within `OUTBOUND_TARGETS`. */
  outbound: Fetch;
  /** Named locks for decisions that read a read model, then write (`api/locks.ts`). */
  locks: Locks;
}

/**
 * The REST write path: decide on the stream, append, then wait until the read
 * models include the new events, so a GET right after sees the change
 * (read-your-writes). Past `PROJECTION_WAIT_MS` the caller gets 503.
 */
export async function write<C, S, E extends DomainEvent>(
  deps: Deps,
  context: CommandContext,
  streamId: string,
  decider: Decider<C, S, E>,
  command: C,
  options?: HandleOptions<S>,
): Promise<Handled<S, E>> {
  const handled = await handle(deps.store, streamId, decider, command, context, options);
  if (handled.result) await readModelsInclude(deps, handled.result.position);
  return handled;
}

/** Resolves once the read models include `position`; past `PROJECTION_WAIT_MS`, 503 saying the change is stored (`StoredNotVisibleError`). */
export async function readModelsInclude(deps: Pick<Deps, 'projections' | 'config'>, position: Position): Promise<void> {
  try {
    await deps.projections.waitFor(position, deps.config.projectionWaitMs);
  } catch (error) {
    throw error instanceof UnavailableError ? new StoredNotVisibleError(error.message, position) : error;
  }
}

/** The context of events written on behalf of an HTTP request, stamped with the platform clock. */
export const requestContext = (deps: Deps, req: Request): CommandContext => commandContext(req, deps.clock());
