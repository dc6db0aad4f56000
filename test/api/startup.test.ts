/**
 * Start-up without DATABASE_URL: the platform creates its own PostgreSQL
 * cluster and JWT secret under DATA_DIR, stops the cluster when it stops, and
 * a second start reuses both without bootstrapping the admin again.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { loadConfig, type Config } from '../../api/config.js';
import { startPlatform, type Platform } from '../../api/platform.js';
import { postgresBinDir } from '../../migrations/cluster.js';

const ADMIN = { username: 'first-admin', password: 'first-admin-password' };
const asRoot = userInfo().uid === 0;

const test = suite<{ dataDir: string }>('start-up with a private database');

test.before((ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'platform-start-'));
  // mkdtemp makes the folder private to us; the cluster below it runs as `postgres` when we are root.
  chmodSync(ctx.dataDir, 0o711);
});
test.after(({ dataDir }) => {
  // Whatever happened above, leave no server running.
  pgCtl(dataDir, ['-m', 'immediate', '-w', 'stop']);
  rmSync(dataDir, { recursive: true, force: true });
});

const pgdata = (dataDir: string) => join(dataDir, 'postgres', 'pg');

/** `pg_ctl` on the platform's cluster, as the user the cluster runs as. */
function pgCtl(dataDir: string, args: string[]) {
  const bin = join(postgresBinDir()!, 'pg_ctl');
  const command = [bin, '-D', pgdata(dataDir), ...args];
  const result = asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', ...command], { encoding: 'utf8' }) : spawnSync(command[0]!, command.slice(1), { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const config = (dataDir: string): Config => ({
  ...loadConfig({}),
  port: 0,
  mqttPort: 0,
  databaseUrl: null,
  dataDir,
  jwtSecret: null,
  adminUsername: ADMIN.username,
  adminPassword: ADMIN.password,
  logLevel: 'silent',
});

async function login(platform: Platform): Promise<Response> {
  return fetch(`http://127.0.0.1:${platform.httpPort}/api/auth/local`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(ADMIN),
  });
}

test('given no DATABASE_URL, when the platform starts, stops and starts again, then it runs its own cluster under DATA_DIR, keeps one JWT secret and bootstraps the admin once', async ({ dataDir }) => {
  // First start: creates the cluster, the secret and the admin.
  let platform = await startPlatform(config(dataDir), pino({ level: 'silent' }));
  let token: string;
  let secret: string;
  try {
    const health = await fetch(`http://127.0.0.1:${platform.httpPort}/api/health`);
    assert.is(health.status, 200);
    const body = (await health.json()) as Record<string, unknown>;
    assert.is(body.status, 'ok');
    assert.is(body.database, true);
    assert.is(body.projections, true);

    const secretFile = join(dataDir, 'jwt-secret');
    assert.ok(existsSync(secretFile), 'the JWT secret is kept in DATA_DIR');
    secret = readFileSync(secretFile, 'utf8');
    assert.ok(secret.trim().length >= 32, 'the generated secret is long enough for HS256');

    assert.ok(existsSync(join(pgdata(dataDir), 'PG_VERSION')), 'the cluster lives under DATA_DIR/postgres');
    const { rows } = await sql<{ setting: string }>`SELECT current_setting('data_directory') AS setting`.execute(platform.deps.db);
    assert.is(rows[0]!.setting, pgdata(dataDir), 'the platform talks to that cluster');
    assert.is(pgCtl(dataDir, ['status']).status, 0, 'the server runs while the platform does');

    const res = await login(platform);
    assert.is(res.status, 200);
    token = ((await res.json()) as { token: string }).token;
  } finally {
    await platform.stop();
  }

  // Stopped: the platform stopped its cluster too.
  const status = pgCtl(dataDir, ['status']);
  assert.is.not(status.status, 0);
  assert.match(status.output, /no server running/);

  // Second start: the same cluster, the same secret, no second admin.
  platform = await startPlatform(config(dataDir), pino({ level: 'silent' }));
  try {
    assert.is(readFileSync(join(dataDir, 'jwt-secret'), 'utf8'), secret, 'the secret is reused, not replaced');
    const again = await login(platform);
    assert.is(again.status, 200, 'the admin created on the first start still logs in');
    const users = await platform.deps.db.selectFrom('users').select('username').execute();
    assert.equal(users, [{ username: ADMIN.username }], 'the admin was bootstrapped once');
    const me = await fetch(`http://127.0.0.1:${platform.httpPort}/api/users?username=${ADMIN.username}`, { headers: { authorization: `Bearer ${token}` } });
    assert.is(me.status, 200, 'a token issued before the restart is still valid: same secret');
  } finally {
    await platform.stop();
  }
  assert.is.not(pgCtl(dataDir, ['status']).status, 0);
});

if (asRoot) {
  test('given a DATA_DIR the postgres user cannot reach, when the platform starts, then it fails with a message naming the folder', async ({ dataDir }) => {
    const closed = join(dataDir, 'closed');
    const inside = join(closed, 'data');
    spawnSync('mkdir', ['-p', inside]);
    chmodSync(closed, 0o700);
    try {
      await startPlatform(config(inside), pino({ level: 'silent' }));
      assert.unreachable('the platform started');
    } catch (error) {
      assert.match((error as Error).message, `the postgres user cannot reach ${join(inside, 'postgres')}`);
    }
  });
} else {
  test.skip('given a DATA_DIR the postgres user cannot reach (runs only as root, where the cluster runs as postgres)', () => {});
}

test.run();
