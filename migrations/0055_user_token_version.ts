import { sql, type Kysely } from 'kysely';

/**
 * `users.token_version`: how many times the user's password was changed or
 * reset (`PasswordChanged`, `PasswordReset`). An access token carries the
 * version it was issued under and is accepted only while it is the user's
 * current one, so a password change or reset ends every token issued before
 * it.
 *
 * The rows already stored get the count of those events in their stream up
 * to the revision the row has applied, as a replay of the log gives them. The
 * count is read from the PostgreSQL event store; with EventStoreDB
 * (`EVENTSTORE_URL`) the rows start at 0 and `npm run rebuild -- users` counts
 * them from the log.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE users ADD COLUMN token_version integer NOT NULL DEFAULT 0`.execute(db);
  await sql`UPDATE users u SET token_version = (
      SELECT count(*) FROM es.events e
      WHERE e.stream_id = 'user-' || u.id::text AND e.type IN ('PasswordChanged', 'PasswordReset') AND e.revision <= u.revision
    )`.execute(db);
  await sql`ALTER TABLE users ALTER COLUMN token_version DROP DEFAULT`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE users DROP COLUMN token_version`.execute(db);
}
