import type { Request } from 'express';
import type { ProjectionRunner } from '../projections/runner.js';
import { handle, type CommandContext, type Decider, type Handled, type HandleOptions } from '../domain/shared/decider.js';
import type { DomainEvent, Position } from '../domain/shared/events.js';
import { UnavailableError } from '../domain/shared/errors.js';
import { StoredNotVisibleError, type Locks } from './locks.js';
import { commandContext } from './http.js';
import type { ReactorDeps } from '../reactors/deps.js';

/** What every capability's routes are built from; assembled once by the composition root. */
export interface Deps extends ReactorDeps {
  jwtSecret: string;
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
