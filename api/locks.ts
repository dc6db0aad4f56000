import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../projections/database.js';
import type { Position } from '../domain/shared/events.js';
import { UnavailableError } from '../domain/shared/errors.js';

/** A write stored but not yet in the read models when its wait ran out: 503 to the client, with where it is. */
export class StoredNotVisibleError extends UnavailableError {
  constructor(
    message: string,
    readonly position: Position,
  ) {
    super(message);
  }
}

/** How long a holder keeps its lock after answering 503, waiting for its write to reach the read models. */
export const HOLD_UNTIL_VISIBLE_MS = 60_000;

export const BUSY = 'The platform is busy with other changes of this kind; try again shortly';

/**
 * Named locks for decisions that read a read model and then write (a username or a topic that must be free, an
 * organization tree without cycles): the next holder's check must see the last holder's write.
 *
 * - Across processes on the same database, a PostgreSQL advisory lock, taken on a connection of its own (`db`, a
 *   pool apart from the one the holder's queries use: were they one pool, callers waiting on the lock could hold
 *   every connection while the holder waits for one). Its wait ends at that pool's statement timeout (503).
 * - Within a process, callers of one name queue in memory first, so one connection per name at most waits on the
 *   server's lock. A caller that waits longer than `waitMs` for its turn gets 503.
 * - A holder whose write is stored but not yet in the read models (they lag past `PROJECTION_WAIT_MS`) answers 503
 *   and keeps the lock until the write is in them, so the next holder never checks against a view without it.
 */
export class Locks {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly visible: (position: Position, timeoutMs: number) => Promise<void>,
    private readonly log: Logger,
    private readonly waitMs: number,
  ) {}

  async serialized<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const before = this.tails.get(name) ?? Promise.resolve();
    let done!: () => void;
    const turn = new Promise<void>((resolve) => (done = resolve));
    const tail = before.then(() => turn);
    this.tails.set(name, tail);
    const end = () => {
      done();
      if (this.tails.get(name) === tail) this.tails.delete(name);
    };
    try {
      await within(before, this.waitMs);
    } catch (error) {
      // A caller that gave up waiting ends its turn at once: the next one's turn comes when the one before ends.
      end();
      throw error;
    }
    // The caller is answered as soon as `fn` settles; a holder whose write is not yet in the read models keeps the
    // lock (and its turn) after that, until the write is in them.
    return new Promise<T>((resolve, reject) => {
      let answered = false;
      void this.db
        .connection()
        .execute(async (conn) => {
          await sql`SELECT pg_advisory_lock(hashtext(${name}))`.execute(conn);
          try {
            answered = true;
            resolve(await fn());
          } catch (error) {
            reject(error);
            if (error instanceof StoredNotVisibleError) await this.holdUntilVisible(name, error.position);
          } finally {
            await sql`SELECT pg_advisory_unlock(hashtext(${name}))`.execute(conn);
          }
        })
        .catch((error: unknown) => {
          // Before `fn`: the lock was never taken (no connection, the wait stopped at the statement timeout). After it:
          // the lock could not be let go, because its connection broke, which lets it go.
          if (!answered) reject(error);
          else this.log.warn({ err: error, lock: name }, 'letting go of a lock failed; its connection is gone, and the lock with it');
        })
        .finally(end);
    });
  }

  private async holdUntilVisible(name: string, position: Position): Promise<void> {
    try {
      await this.visible(position, HOLD_UNTIL_VISIBLE_MS);
    } catch {
      this.log.error({ lock: name, position: { commit: String(position.commit), prepare: String(position.prepare) } }, 'a lock is let go before its holder\'s write reached the read models: they are far behind');
    }
  }
}

/** Resolves with `work`, or fails with 503 (`BUSY`) after `ms`. */
function within(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new UnavailableError(BUSY)), ms)))]).finally(() => clearTimeout(timer));
}
