import { sql, type Kysely } from 'kysely';

/**
 * What holds the PostgreSQL store's reads back. The store never reads at or
 * past `pg_snapshot_xmin(pg_current_snapshot())`, the oldest transaction
 * still running that has written something, in any database of the server
 * (transaction ids are the server's). While such a transaction stays open,
 * no event committed after it began reaches a subscriber: the read models,
 * every reactor and every node's indexes wait, and their lag does not even
 * count those events yet. This names that transaction.
 */
export interface HorizonHolder {
  /** Its server process (null for a prepared transaction, which has none). */
  pid: number | null;
  database: string | null;
  user: string | null;
  application: string | null;
  /** `pg_stat_activity.state` (`idle in transaction`, `active`, …), or `prepared`. */
  state: string | null;
  /** A prepared transaction's name. */
  prepared?: string;
  /** How long the transaction has run (or been prepared). */
  seconds: number;
}

/**
 * The transaction that holds the reads back, when it has run for `minSeconds` or more; null when none has.
 * A session of another role is named only to a role that may see it (the same role, a superuser, or
 * `pg_read_all_stats`).
 */
export async function readsHeldBackBy(db: Kysely<any>, minSeconds: number): Promise<HorizonHolder | null> {
  const { rows } = await sql<{ pid: number | null; database: string | null; user: string | null; application: string | null; state: string | null; prepared: string | null; seconds: number }>`
    WITH horizon AS (SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::numeric % 4294967296)::bigint AS xid)
    SELECT a.pid, a.datname AS database, a.usename AS user, a.application_name AS application, a.state, NULL AS prepared,
      extract(epoch FROM now() - a.xact_start)::float8 AS seconds
    FROM pg_stat_activity a, horizon h WHERE a.backend_xid IS NOT NULL AND a.backend_xid::text::bigint = h.xid
    UNION ALL
    SELECT NULL, p.database, p.owner, NULL, 'prepared', p.gid, extract(epoch FROM now() - p.prepared)::float8
    FROM pg_prepared_xacts p, horizon h WHERE p.transaction::text::bigint = h.xid
    LIMIT 1`.execute(db);
  const row = rows[0];
  if (!row || row.seconds < minSeconds) return null;
  return {
    pid: row.pid,
    database: row.database,
    user: row.user,
    application: row.application,
    state: row.state,
    ...(row.prepared !== null ? { prepared: row.prepared } : {}),
    seconds: Math.round(row.seconds),
  };
}
