import { sql, type Kysely } from 'kysely';
import { usernameKey } from '../domain/users/username.js';

/**
 * Usernames are unique without regard to case, and the username's claim
 * stream decides it with JavaScript's lower case (`usernameKey`). The read
 * model's unique index on PostgreSQL's `lower(username)` folds some letters
 * differently (`İ` is `i` to PostgreSQL, `i̇` to JavaScript), so a name the
 * claim took could be refused by the read model: the user was stored but never
 * shown. The read model now keeps the claim's own key and is unique on it;
 * login and the username filter compare that key.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE users ADD COLUMN username_key text`.execute(db);
  const rows = await db.selectFrom('users').select(['id', 'username']).execute();
  for (const r of rows) await sql`UPDATE users SET username_key = ${usernameKey(r.username as string)} WHERE id = ${r.id}`.execute(db);
  await sql`ALTER TABLE users ALTER COLUMN username_key SET NOT NULL`.execute(db);
  await sql`CREATE UNIQUE INDEX users_username_key ON users (username_key)`.execute(db);
  await sql`DROP INDEX users_username`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`CREATE UNIQUE INDEX users_username ON users (lower(username))`.execute(db);
  await sql`ALTER TABLE users DROP COLUMN username_key`.execute(db);
}
