import { sql, type Kysely } from 'kysely';

/**
 * Runs `during` while another transaction holds `table` in `mode`: EXCLUSIVE by default (reads go on, writes to
 * it wait), ACCESS EXCLUSIVE to make reads wait too; then lets them through.
 */
export async function whileLocked<T>(db: Kysely<any>, table: string, during: () => Promise<T>, mode: 'EXCLUSIVE' | 'ACCESS EXCLUSIVE' = 'EXCLUSIVE'): Promise<T> {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let locked!: () => void;
  const lockTaken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await sql`LOCK TABLE ${sql.table(table)} IN ${sql.raw(mode)} MODE`.execute(trx);
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
