/**
 * Every migration has a working `down`: a migrated database goes back to no
 * migration at all and forward again to the same schema.
 */
import pg from 'pg';
import { Kysely, NO_MIGRATIONS, PostgresDialect, sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { migrations, migrator } from '../../migrations/index.js';
import { allProjections } from '../../projections/index.js';
import { createTestDatabase } from '../support/cluster.js';

const test = suite<{ db: Kysely<any> }>('migrations');

test.before(async (ctx) => {
  ctx.db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: await createTestDatabase(), max: 2 }) }) });
});
test.after(async (ctx) => {
  await ctx.db.destroy();
});

/** Tables, columns, indexes and constraints of the platform's schemas, as sorted lines. */
async function schema(db: Kysely<any>): Promise<string[]> {
  const { rows } = await sql<{ line: string }>`
    SELECT 'column ' || table_schema || '.' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '') AS line
      FROM information_schema.columns WHERE table_schema IN ('public', 'es')
    UNION ALL
    SELECT 'index ' || schemaname || '.' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname IN ('public', 'es')
    UNION ALL
    SELECT 'constraint ' || n.nspname || '.' || c.conname || ' ' || pg_get_constraintdef(c.oid)
      FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname IN ('public', 'es')`.execute(db);
  return rows.map((r) => r.line).sort();
}

async function tables(db: Kysely<any>, schemaName: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT table_name AS name FROM information_schema.tables WHERE table_schema = ${schemaName} AND table_type = 'BASE TABLE'`.execute(db);
  return rows.map((r) => r.name).sort();
}

async function schemaExists(db: Kysely<any>, name: string): Promise<boolean> {
  const { rows } = await sql`SELECT 1 FROM information_schema.schemata WHERE schema_name = ${name}`.execute(db);
  return rows.length === 1;
}

const readModels = [...allProjections().flatMap((p) => p.tables), 'image_blobs'];
/** Kysely's own bookkeeping and PostGIS's reference table stay. */
const KEPT = ['kysely_migration', 'kysely_migration_lock', 'spatial_ref_sys'];

test('given a migrated database, when migrated down to no migration, then the event store schema and every read model are gone; when migrated up again, then the same schema is back', async ({ db }) => {
  const migrated = await schema(db);
  assert.ok(await schemaExists(db, 'es'));
  assert.equal(await tables(db, 'es'), ['checkpoints', 'events', 'leases', 'parked_events', 'streams']);
  const before = await tables(db, 'public');
  for (const table of readModels) assert.ok(before.includes(table), `${table} exists after the migrations`);

  const down = await migrator(db).migrateTo(NO_MIGRATIONS);
  assert.is(down.error, undefined, String(down.error));
  assert.equal(
    down.results?.map((r) => [r.migrationName, r.direction, r.status]),
    Object.keys(migrations).reverse().map((name) => [name, 'Down', 'Success']),
    'every migration ran its down, newest first',
  );
  assert.not.ok(await schemaExists(db, 'es'), 'the es schema is dropped');
  assert.equal(await tables(db, 'public'), KEPT, 'only the migration bookkeeping and PostGIS remain');

  const up = await migrator(db).migrateToLatest();
  assert.is(up.error, undefined, String(up.error));
  assert.equal(up.results?.map((r) => [r.migrationName, r.status]), Object.keys(migrations).map((name) => [name, 'Success']));
  assert.equal(await tables(db, 'public'), before);
  assert.equal(await schema(db), migrated, 'columns, indexes and constraints are as they were');
});

test('given history stored one row per field, when migrated to one row per report and back, then every reading of every series is kept, ties and kinds included', async ({ db }) => {
  const before = await migrator(db).migrateTo('0052_analytics');
  assert.is(before.error, undefined, String(before.error));
  // Two fields of one report, a string, a boolean, and two readings of one field at one time.
  const rows = [
    ['h1', 'temperature', '2026-11-24T10:00:00Z', 21.5, null, null],
    ['h1', 'humidity', '2026-11-24T10:00:00Z', 40, null, null],
    ['h1', 'temperature', '2026-11-24T10:01:00Z', 22, null, null],
    ['h1', 'temperature', '2026-11-24T10:01:00Z', 23, null, null],
    ['h1', 'state', '2026-11-24T10:02:00Z', null, null, 'open'],
    ['h1', 'door', '2026-11-24T10:02:00Z', 1, true, null],
    ['h2', 'temperature', '2026-11-24T10:00:00Z', -4, null, null],
  ] as const;
  for (const r of rows) {
    await sql`INSERT INTO device_history (device_id, field, time, num, bool, str) VALUES (${r[0]}, ${r[1]}, ${r[2]}, ${r[3]}, ${r[4]}, ${r[5]})`.execute(db);
  }
  const readings = async (read: (device: string, field: string) => ReturnType<typeof sql>) => {
    const out: string[] = [];
    for (const [device, field] of [...new Set(rows.map((r) => `${r[0]} ${r[1]}`))].map((k) => k.split(' ') as [string, string])) {
      const { rows: found } = await read(device, field).execute(db);
      for (const f of found as { time: Date; num: number | null; bool: boolean | null; str: string | null }[]) out.push(`${device} ${field} ${f.time.toISOString()} ${f.num} ${f.bool} ${f.str}`);
    }
    return out.sort();
  };
  const fieldwise = (device: string, field: string) => sql`SELECT time, num, bool, str FROM device_history WHERE device_id = ${device} AND field = ${field}`;
  const want = await readings(fieldwise);
  assert.is(want.length, rows.length);

  const up = await migrator(db).migrateToLatest();
  assert.is(up.error, undefined, String(up.error));
  assert.equal(await readings((device, field) => sql`SELECT time, num, bool, str FROM device_series(${device}, ${field})`), want);
  const { rows: reports } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM device_history WHERE device_id = 'h1'`.execute(db);
  assert.is(reports[0]!.n, 4, 'the fields of one time share a row; the second reading of a field at one time has its own');
  const { rows: view } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM analytics.device_history`.execute(db);
  assert.is(view[0]!.n, rows.length, 'the analytics view still has a row per reading');

  const down = await migrator(db).migrateTo('0052_analytics');
  assert.is(down.error, undefined, String(down.error));
  assert.equal(await readings(fieldwise), want);
  await sql`DELETE FROM device_history`.execute(db);
  const again = await migrator(db).migrateToLatest();
  assert.is(again.error, undefined, String(again.error));
});

test('given users stored before token versions, when migrated up, then each counts the password changes and resets it has applied; migrated down, the column goes', async ({ db }) => {
  const before = await migrator(db).migrateTo('0054_username_key');
  assert.is(before.error, undefined, String(before.error));
  const changed = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
  const untouched = '7a2d2d9f-9b66-4e1c-8e9b-1a6a3c4d5e6f';
  const user = (id: string, username: string, revision: number) =>
    sql`INSERT INTO users (id, username, username_key, profile, password_hash, revision, created_at, updated_at)
      VALUES (${id}, ${username}, ${username}, '{"enabled": true}', 'h', ${revision}, now(), now())`.execute(db);
  await user(changed, 'changed', 3);
  await user(untouched, 'untouched', 1);
  const events: [string, number, string][] = [
    [changed, 0, 'UserCreated'],
    [changed, 1, 'PasswordChanged'],
    [changed, 2, 'UserUpdated'],
    [changed, 3, 'PasswordReset'],
    // Not applied by the read model yet: the runner counts it when it gets there.
    [changed, 4, 'PasswordChanged'],
    [untouched, 0, 'UserCreated'],
    [untouched, 1, 'UserUpdated'],
  ];
  for (const [id, revision, type] of events) {
    await sql`INSERT INTO es.events (stream_id, revision, event_id, type, data, metadata)
      VALUES (${`user-${id}`}, ${revision}, gen_random_uuid(), ${type}, '{}', '{}')`.execute(db);
  }

  const up = await migrator(db).migrateToLatest();
  assert.is(up.error, undefined, String(up.error));
  const { rows } = await sql<{ id: string; v: number }>`SELECT id::text, token_version AS v FROM users ORDER BY username`.execute(db);
  assert.equal(rows, [{ id: changed, v: 2 }, { id: untouched, v: 0 }]);

  const down = await migrator(db).migrateTo('0054_username_key');
  assert.is(down.error, undefined, String(down.error));
  const { rows: columns } = await sql`SELECT 1 FROM information_schema.columns WHERE table_name = 'users' AND column_name = 'token_version'`.execute(db);
  assert.is(columns.length, 0);
  await sql`DELETE FROM users`.execute(db);
  await sql`DELETE FROM es.events`.execute(db);
  const again = await migrator(db).migrateToLatest();
  assert.is(again.error, undefined, String(again.error));
});

test.run();
