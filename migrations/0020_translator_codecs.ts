import { sql, type Kysely } from 'kysely';

/** Translators' field maps, their unmapped-data policy, and their examples with how they came out at upload. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE translators
    ADD COLUMN field_map jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN unmapped text NOT NULL DEFAULT 'reject',
    ADD COLUMN examples jsonb NOT NULL DEFAULT '[]'::jsonb`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE translators DROP COLUMN IF EXISTS field_map, DROP COLUMN IF EXISTS unmapped, DROP COLUMN IF EXISTS examples`.execute(db);
}
