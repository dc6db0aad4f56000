import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { migrateToLatest } from '../../migrations/index.js';

const TEMPLATE = 'platform_template';

/**
 * One private cluster per test run, durability off. Its template database has
 * PostGIS and every migration, so each suite gets a fresh database in a few
 * milliseconds with `createTestDatabase()`.
 */
export async function startTestCluster(): Promise<{ stop(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'platform-test-'));
  const cluster = startPrivateCluster(dir, TEMPLATE, { fast: true });
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: cluster.url(TEMPLATE), max: 2 }) }) });
  await migrateToLatest(db);
  await db.destroy();
  process.env.TEST_CLUSTER_URL = cluster.url('postgres');
  process.env.TEST_TEMPLATE_DATABASE = TEMPLATE;
  process.env.TEST_DATA_DIR = dir;
  return {
    async stop() {
      cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let counter = 0;

/** A new database cloned from the migrated template; returns its connection string. */
export async function createTestDatabase(): Promise<string> {
  const base = process.env.TEST_CLUSTER_URL;
  if (!base) throw new Error('tests must run through test/run.ts, which starts the test cluster');
  const name = `t_${process.pid}_${++counter}_${Date.now().toString(36)}`;
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}" TEMPLATE "${process.env.TEST_TEMPLATE_DATABASE}"`);
  } finally {
    await client.end();
  }
  return base.replace('/postgres?', `/${name}?`);
}
