import { sql, type Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import { allProjections } from '../../projections/index.js';

/** Every row of every read model, as sorted JSON per table, for comparing two states. */
export async function snapshotReadModels(db: Kysely<Database>): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of allProjections().flatMap((p) => p.tables)) {
    const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(t) AS row FROM ${sql.table(table)} t`.execute(db);
    out[table] = rows.map((r) => JSON.stringify(r.row)).sort();
  }
  return out;
}
