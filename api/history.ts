import type { Request } from 'express';
import type { Deps } from './deps.js';
import type { Decider } from '../domain/shared/decider.js';
import type { DomainEvent, RecordedEvent } from '../domain/shared/events.js';
import { revisions, stateAt, streamEvents, type Revision } from '../domain/audit/history.js';

/**
 * Time travel and revisions for the routes of each resource: its stream
 * folded with its decider's own `evolve`, the one the live read model applies.
 */

/** `?at=` as the UTC ISO 8601 text event times are written in; undefined when absent. The document has checked its format. */
export function timeOf(req: Request): string | undefined {
  const at = req.query.at;
  return typeof at === 'string' ? new Date(at).toISOString() : undefined;
}

const foldOf = <S, E extends DomainEvent>(decider: Decider<unknown, S, E>) => ({
  initial: decider.initialState,
  evolve: (state: S, event: RecordedEvent) => decider.evolve(state, event as unknown as E),
});

/** The resource's state at `at`, and the revision of the last event folded (-1 for none). */
export function resourceAt<S, E extends DomainEvent>(deps: Deps, streamId: string, decider: Decider<any, S, E>, at: string): Promise<{ state: S; revision: number }> {
  return stateAt(deps.store, streamId, foldOf(decider), at);
}

/** Every revision of the resource, oldest first, its changes compared in `view` (undefined while the resource does not exist). */
export function resourceRevisions<S, E extends DomainEvent>(
  deps: Deps,
  streamId: string,
  decider: Decider<any, S, E>,
  view: (state: S) => unknown,
  shown?: (event: RecordedEvent) => boolean,
): Promise<Revision[]> {
  return revisions(streamEvents(deps.store, streamId), { ...foldOf(decider), view }, shown);
}
