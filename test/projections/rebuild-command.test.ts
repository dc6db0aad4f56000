/**
 * `npm run rebuild` as a command: the script recognises itself as the program
 * being run even when reached through a path with spaces and a symlink.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Database } from '../../projections/database.js';
import { startTestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const test = suite('rebuild command');

test('given stored events and emptied read models, when the rebuild script is run through a symlinked path with spaces, then it rebuilds them', async () => {
  const t = await startTestPlatform();
  const created = await t.call('POST', '/api/users', { body: { username: 'rebuilt-by-command' } });
  assert.is(created.status, 201, created.text);
  const url = t.platform.deps.config.databaseUrl!;
  await t.stop();

  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }) });
  const dir = mkdtempSync(join(tmpdir(), 'rebuild command '));
  try {
    const live = await snapshotReadModels(db);
    assert.ok(live.users!.some((row) => row.includes('rebuilt-by-command')));
    await db.deleteFrom('users').execute();

    const linked = join(dir, 'platform with spaces');
    symlinkSync(repo, linked);
    const { stdout } = await promisify(execFile)(join(repo, 'node_modules/.bin/tsx'), [join(linked, 'projections/rebuild.ts')], {
      cwd: dir,
      env: { ...process.env, DATABASE_URL: url, EVENTSTORE_URL: '', LOG_LEVEL: 'info' },
      timeout: 60_000,
    });
    assert.match(stdout, /read models rebuilt/, 'the script ran its rebuild');
    assert.equal(await snapshotReadModels(db), live);
  } finally {
    await db.destroy();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
