/**
 * `npm run rebuild`: empties every read model and replays every event.
 * Stop the platform first; a running platform keeps its own checkpoint in memory.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { pino, type Logger } from 'pino';
import { loadConfig } from '../api/config.js';
import { openDatabase } from '../api/platform.js';
import { migrateToLatest } from '../migrations/index.js';
import { createPostgresStore } from '../domain/eventstore/postgres.js';
import { createEsdbStore } from '../domain/eventstore/esdb.js';
import type { EventStore } from '../domain/eventstore/port.js';
import { versioned } from '../domain/eventstore/versioned.js';
import { ProjectionRunner } from './runner.js';
import { allProjections } from './index.js';
import type { Database } from './database.js';

/** Empties the read models and the checkpoint, then applies every stored event. */
export async function rebuild(store: EventStore, db: Kysely<Database>, log: Logger): Promise<void> {
  const runner = new ProjectionRunner(store, db, allProjections(), log);
  await runner.reset();
  await runner.catchUp();
}

/** True when this file is the program being run (`tsx projections/rebuild.ts`), whatever spaces or symlinks its path holds. */
const isMain = (): boolean => {
  const entry = process.argv[1];
  if (!entry) return false;
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href;
  } catch {
    return false;
  }
};

if (isMain()) {
  const config = loadConfig();
  const log = pino({ level: config.logLevel });
  const database = openDatabase(config, log);
  const pool = new pg.Pool({ connectionString: database.url });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  await migrateToLatest(db);
  const store = versioned(config.eventstoreUrl ? createEsdbStore(config.eventstoreUrl) : createPostgresStore(pool));
  const started = Date.now();
  await rebuild(store, db, log);
  log.info({ ms: Date.now() - started }, 'read models rebuilt');
  await store.close();
  await db.destroy();
  // Leave a cluster that a running platform uses alone.
  if (database.cluster && !database.cluster.wasRunning) database.cluster.stop();
}
