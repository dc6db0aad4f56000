import { sql, type Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';

/**
 * Runs `body` while PostgreSQL refuses rows written to `table` (inserts and
 * updates) for which `when`, a condition on `NEW`, holds: the first `times` of
 * them (every one with `Infinity`), as a database that fails at that moment
 * would. Returns how many matching rows were tried, the refused ones included;
 * a sequence counts them, outside the transactions that fail.
 */
export async function refusing(db: Kysely<any>, table: string, when: string, body: () => Promise<void>, times = 1): Promise<number> {
  const name = `test_refuse_${randomBytes(4).toString('hex')}`;
  const limit = Number.isFinite(times) ? String(times) : 'NULL';
  await sql.raw(`CREATE SEQUENCE ${name}`).execute(db);
  await sql
    .raw(
      `CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE n bigint;
        BEGIN
          IF ${when} THEN
            n := nextval('${name}');
            IF ${limit} IS NULL OR n <= ${limit} THEN RAISE EXCEPTION 'the database failed'; END IF;
          END IF;
          RETURN NEW;
        END $$`,
    )
    .execute(db);
  await sql.raw(`CREATE TRIGGER ${name} BEFORE INSERT OR UPDATE ON ${table} FOR EACH ROW EXECUTE FUNCTION ${name}()`).execute(db);
  try {
    await body();
    const { rows } = await sql.raw<{ tried: string }>(`SELECT CASE WHEN is_called THEN last_value ELSE 0 END::text AS tried FROM ${name}`).execute(db);
    return Number(rows[0]!.tried);
  } finally {
    await sql.raw(`DROP TRIGGER ${name} ON ${table}`).execute(db);
    await sql.raw(`DROP FUNCTION ${name}()`).execute(db);
    await sql.raw(`DROP SEQUENCE ${name}`).execute(db);
  }
}
