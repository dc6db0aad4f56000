/**
 * The process (`api/main.ts`) and its signals: a SIGTERM during the start
 * stops what the start had started, the private PostgreSQL included; a
 * second signal during a stop ends the process at once.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { postgresBinDir } from '../../migrations/cluster.js';
import { createTestDatabase } from '../support/cluster.js';

const ROOT = new URL('../..', import.meta.url).pathname;
const ADMIN = { ADMIN_USERNAME: 'admin', ADMIN_PASSWORD: 'admin-password-1' };

interface Run {
  child: ChildProcess;
  logs: Record<string, any>[];
  /** Resolves with the first log line whose message includes `text`. */
  line(text: string, ms: number): Promise<Record<string, any>>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function run(env: Record<string, string>): Run {
  const child = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', MQTT_PORT: '0', LOG_LEVEL: 'info', ...ADMIN, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, any>[] = [];
  const waiting: { text: string; resolve(l: Record<string, any>): void }[] = [];
  let buffer = '';
  child.stdout!.on('data', (d) => {
    buffer += d;
    for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
      const text = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      try {
        const entry = JSON.parse(text) as Record<string, any>;
        logs.push(entry);
        for (const w of waiting.splice(0)) (String(entry.msg).includes(w.text) ? w.resolve(entry) : waiting.push(w));
      } catch {
        // not a log line
      }
    }
  });
  child.stderr!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const line = (text: string, ms: number) =>
    new Promise<Record<string, any>>((resolve, reject) => {
      const seen = logs.find((l) => String(l.msg).includes(text));
      if (seen) return resolve(seen);
      const timer = setTimeout(() => reject(new Error(`no log line '${text}' within ${ms} ms`)), ms);
      waiting.push({ text, resolve: (l) => (clearTimeout(timer), resolve(l)) });
    });
  return { child, logs, line, exited };
}

const asRoot = userInfo().uid === 0;

function pgCtl(dataDir: string, args: string[]) {
  const command = [join(postgresBinDir()!, 'pg_ctl'), '-D', join(dataDir, 'postgres', 'pg'), ...args];
  const result = asRoot ? spawnSync('runuser', ['-u', 'postgres', '--', ...command], { encoding: 'utf8' }) : spawnSync(command[0]!, command.slice(1), { encoding: 'utf8' });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

const test = suite('the process and its signals');

test('given a start on a private PostgreSQL, when SIGTERM comes while it starts, then the process stops what it started, the server too, and exits 0', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'platform-signal-'));
  chmodSync(dataDir, 0o711);
  const p = run({ DATA_DIR: dataDir });
  try {
    await p.line('creating a private PostgreSQL cluster', 60_000);
    p.child.kill('SIGTERM');
    const exit = await p.exited;
    assert.equal(exit, { code: 0, signal: null }, JSON.stringify(p.logs.slice(-5)));
    assert.not.ok(p.logs.some((l) => l.msg === 'HTTP listening'), 'it did not go on to serve');
    const status = pgCtl(dataDir, ['status']);
    assert.match(status.output, /no server running/, 'the private PostgreSQL was stopped');
  } finally {
    p.child.kill('SIGKILL');
    pgCtl(dataDir, ['-m', 'immediate', '-w', 'stop']);
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('given a stop that waits for a request under way, when a second signal comes, then the process exits at once', async () => {
  const url = await createTestDatabase();
  const p = run({ DATABASE_URL: url, DATA_DIR: mkdtempSync(join(tmpdir(), 'platform-signal-')) });
  const lock = new pg.Client({ connectionString: url });
  lock.on('error', () => undefined);
  try {
    const port = (await p.line('HTTP listening', 60_000)).port as number;
    const login = await fetch(`http://127.0.0.1:${port}/api/auth/local`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: ADMIN.ADMIN_USERNAME, password: ADMIN.ADMIN_PASSWORD }) });
    const { token } = (await login.json()) as { token: string };
    // A write whose read-your-writes waits: its read model is locked.
    await lock.connect();
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE usergroups IN ACCESS EXCLUSIVE MODE');
    const write = fetch(`http://127.0.0.1:${port}/api/usergroups`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ name: 'waits' }) }).catch(() => null);
    await new Promise((r) => setTimeout(r, 500));
    p.child.kill('SIGTERM');
    await p.line('stopping: HTTP answers the requests under way', 10_000);
    const second = Date.now();
    p.child.kill('SIGTERM');
    const exit = await p.exited;
    // At once, not after the 10 s grace the first signal began.
    assert.ok(Date.now() - second < 5000, `exited ${Date.now() - second} ms after the second signal`);
    assert.is(exit.code, 1);
    assert.ok(p.logs.some((l) => String(l.msg).includes('a second signal')), 'it said why');
    await write;
  } finally {
    p.child.kill('SIGKILL');
    await lock.end().catch(() => undefined);
  }
});

test.run();
