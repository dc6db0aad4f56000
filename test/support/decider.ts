import * as assert from 'uvu/assert';
import type { Decider } from '../../domain/shared/decider.js';
import type { DomainEvent } from '../../domain/shared/events.js';

/**
 * The one decider specification of the suite: given these events, when this
 * command is decided, then these events, or this error. Pure: no store, no
 * clock; the decider alone.
 *
 *   deciderSpec(deviceDecider).given([registered]).when(command).then([reported]);
 *   deciderSpec(deviceDecider).given([]).when(command).thenThrows(NotFoundError, /Iotnode/);
 */
export function deciderSpec<C, S, E extends DomainEvent>(decider: Decider<C, S, E>) {
  return {
    given(events: E[]) {
      const state = events.reduce<S>((s, e) => decider.evolve(s, e), decider.initialState());
      return {
        state,
        when(command: C) {
          const decide = () => decider.decide(command, state);
          return {
            /** The events decided; for checks that need more than equality. */
            events: decide,
            then(expected: E[]) {
              assert.equal(decide(), expected);
            },
            thenThrows(type: abstract new (...args: never[]) => Error, message?: string | RegExp) {
              let events: E[];
              try {
                events = decide();
              } catch (error) {
                assert.instance(error, type);
                if (typeof message === 'string') assert.is((error as Error).message, message);
                else if (message) assert.match((error as Error).message, message);
                return error as Error;
              }
              assert.unreachable(`expected ${type.name}, but the command was accepted with ${JSON.stringify(events)}`);
              throw new Error('unreachable');
            },
          };
        },
      };
    },
  };
}
