import { sql, type Kysely } from 'kysely';

/**
 * Leadership of the nodes of a cluster (`REDIS_URL` set): one row per
 * leader-only part (a subscriber's name). The node that takes a part's
 * PostgreSQL advisory lock raises its `epoch`; every batch, checkpoint and
 * side effect of that part checks the epoch it started with, so a node that
 * lost the lock without noticing can never apply or deliver anything.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE TABLE es.leases (
    name text PRIMARY KEY,
    holder text NOT NULL,
    epoch bigint NOT NULL,
    taken_at timestamptz NOT NULL DEFAULT now()
  )`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE es.leases`.execute(db);
}
