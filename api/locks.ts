import { sql, type Kysely } from 'kysely';
import type { Database } from '../projections/database.js';

/**
 * Runs `fn` while holding a PostgreSQL advisory lock named `name`, so
 * decisions that read a read model and then write (a username or a topic
 * that must be free) never interleave, in this process or any other on the
 * same database. `fn` should return only once its write is visible in the
 * read models (what `write()` does), so the next holder sees it.
 */
export async function serialized<T>(db: Kysely<Database>, name: string, fn: () => Promise<T>): Promise<T> {
  return db.connection().execute(async (conn) => {
    await sql`SELECT pg_advisory_lock(hashtext(${name}))`.execute(conn);
    try {
      return await fn();
    } finally {
      await sql`SELECT pg_advisory_unlock(hashtext(${name}))`.execute(conn);
    }
  });
}
