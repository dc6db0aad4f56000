import { sql, type Kysely } from 'kysely';

/**
 * Runs `during` while another transaction holds `table` in EXCLUSIVE mode (reads go on, writes to it wait), then
 * lets the writes through.
 */
export async function whileLocked<T>(db: Kysely<any>, table: string, during: () => Promise<T>): Promise<T> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE ${sql.table(table)} IN EXCLUSIVE MODE`.execute(trx);
    locked();
    await held;
  });
  await lockTaken;
  try {
    return await during();
  } finally {
    release();
    await holder;
  }
}
