import type { RequestHandler, Response } from 'express';
import { TooManyRequestsError } from '../domain/shared/errors.js';

interface Turns {
  running: number;
  /** Requests waiting their turn, first come first served; each starts its request when called. */
  waiting: (() => void)[];
}

/**
 * One user's requests take turns: at most `concurrency` of them run at a
 * time, up to `queued` more wait in order, and the next is refused with 429.
 * The HTTP front has a few database connections for every user
 * (`HTTP_DATABASE_CONNECTIONS`); without turns, one user's burst of slow
 * requests (a year of history, a broad geoquery, an export) takes them all and
 * every other user's request waits, then fails.
 *
 * A request's turn ends when its answer is complete. A caller that goes away
 * does not end it early, as its handler may still hold a connection: the turn
 * ends when the handler ends the answer, or after `graceMs` (the longest a
 * statement of the request may run). A request whose caller goes away while
 * it waits never runs. Anonymous operations (logging in, health, webhooks,
 * which their connector's secret authenticates) do not take turns.
 */
export function userTurns(concurrency: number, queued: number, graceMs: number): RequestHandler {
  const users = new Map<string, Turns>();

  const release = (user: string, turns: Turns) => {
    const next = turns.waiting.shift();
    if (next) return next();
    turns.running--;
    if (turns.running === 0) users.delete(user);
  };

  /** Calls `done` once: when the handler ends the answer, or `graceMs` after the caller went away without it. */
  const whenAnswered = (res: Response, done: () => void) => {
    let called = false;
    const once = () => {
      if (called) return;
      called = true;
      done();
    };
    const end = res.end;
    res.end = function (this: Response, ...args: Parameters<Response['end']>) {
      res.end = end;
      once();
      return end.apply(this, args);
    } as Response['end'];
    res.once('close', () => {
      if (!res.writableEnded) setTimeout(once, graceMs).unref();
    });
  };

  return (req, res, next) => {
    const user = req.principal?.id;
    if (!user) return next();
    let turns = users.get(user);
    if (!turns) users.set(user, (turns = { running: 0, waiting: [] }));
    const t = turns;
    const start = () => {
      whenAnswered(res, () => release(user, t));
      next();
    };
    if (t.running < concurrency) {
      t.running++;
      return start();
    }
    if (t.waiting.length >= queued) {
      return next(new TooManyRequestsError(`ERR - too many requests at once: ${concurrency} of yours run at a time and ${queued} wait their turn; try again when one is answered`, 1));
    }
    let gone = false;
    const turn = () => (gone ? release(user, t) : start());
    t.waiting.push(turn);
    res.once('close', () => {
      if (!t.waiting.includes(turn)) return;
      // Gone before its turn: its place in the queue is freed.
      gone = true;
      t.waiting.splice(t.waiting.indexOf(turn), 1);
    });
  };
}
