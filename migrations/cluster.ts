import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, chownSync, chmodSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { userInfo } from 'node:os';

/**
 * The private PostgreSQL cluster used when `DATABASE_URL` is unset: created
 * under a folder on first start, reached only through a Unix socket inside that
 * folder, and run as the `postgres` user when the platform runs as root, since
 * PostgreSQL refuses to run as root.
 */
export interface PrivateCluster {
  /** A connection string for database `name` in this cluster. */
  url(name: string): string;
  /** True when the server was already running before this process started it (a crash left it up, or another process uses it). */
  wasRunning: boolean;
  stop(): void;
}

export const REQUIRED_PACKAGES = 'postgresql-15 postgresql-15-postgis-3';

export class MissingBinariesError extends Error {}

export interface ClusterOptions {
  /** Durability off, for throw-away test clusters only. */
  fast?: boolean;
  /** Install missing packages with apt-get when running as root. */
  install?: boolean;
  log?: (line: string) => void;
  /** Where to look for the server binaries; the Debian locations when absent. */
  binDirs?: string[];
}

const BIN_DIRS = ['/usr/lib/postgresql/15/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/17/bin'];

export function postgresBinDir(candidates: string[] = BIN_DIRS): string | null {
  for (const dir of candidates) {
    if (existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl'))) return dir;
  }
  if (candidates !== BIN_DIRS) return null;
  const fromPath = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  const dir = fromPath.status === 0 ? fromPath.stdout.trim() : '';
  return dir && existsSync(join(dir, 'initdb')) ? dir : null;
}

function postgisInstalled(bin: string): boolean {
  const share = spawnSync(join(bin, 'pg_config'), ['--sharedir'], { encoding: 'utf8' });
  const dir = share.status === 0 ? share.stdout.trim() : '/usr/share/postgresql/15';
  return existsSync(join(dir, 'extension', 'postgis.control'));
}

/** Finds the binaries, installing them from Debian's packages when allowed and possible. */
export function ensureBinaries(options: ClusterOptions = {}): string {
  let bin = postgresBinDir(options.binDirs);
  if (bin && postgisInstalled(bin)) return bin;
  const root = process.getuid?.() === 0;
  const apt = spawnSync('which', ['apt-get']).status === 0;
  if (options.install !== false && root && apt) {
    options.log?.(`installing ${REQUIRED_PACKAGES} with apt-get`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env });
    execFileSync('apt-get', ['install', '-y', '-qq', ...REQUIRED_PACKAGES.split(' ')], { stdio: 'ignore', env });
    bin = postgresBinDir(options.binDirs);
    if (bin && postgisInstalled(bin)) return bin;
  }
  throw new MissingBinariesError(
    `PostgreSQL 15 with PostGIS 3 is not installed: install the Debian packages ${REQUIRED_PACKAGES}, or set DATABASE_URL to an existing PostgreSQL with PostGIS`,
  );
}

/**
 * glibc's allocator settings for the server's processes. By default glibc
 * hands freed memory at the top of the heap back to the kernel once more than
 * 128 KiB of it is free, and serves larger allocations with a fresh `mmap`
 * each. A backend allocates and frees a few megabytes for every batch
 * statement (a batch's JSON, its tuples, its plan), so every such statement
 * faulted its memory in again, page by page: a seventh of PostgreSQL's CPU
 * time under ingest (docs/benchmarks.md). With both thresholds at 16 MiB a
 * backend keeps reusing what it freed; what it holds beyond that still goes
 * back. Settings of the operator's own in `GLIBC_TUNABLES` win.
 */
export const MALLOC_TUNABLES = ['glibc.malloc.trim_threshold=16777216', 'glibc.malloc.mmap_threshold=16777216'];

/** The environment the private cluster's server runs with: this process's, with `MALLOC_TUNABLES` added to `GLIBC_TUNABLES`. */
export function serverEnvironment(base: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const own = (base.GLIBC_TUNABLES ?? '').split(':').filter(Boolean);
  const named = new Set(own.map((t) => t.split('=')[0]));
  const tunables = [...own, ...MALLOC_TUNABLES.filter((t) => !named.has(t.split('=')[0]))];
  return { ...base, GLIBC_TUNABLES: tunables.join(':') };
}

/** Creates the cluster on first use, starts it unless it already runs, and creates database `name` with PostGIS. */
export function startPrivateCluster(dataDir: string, name: string, options: ClusterOptions = {}): PrivateCluster {
  const bin = ensureBinaries(options);
  const root = resolve(dataDir);
  const pgdata = join(root, 'pg');
  const sockets = join(root, 'run');
  const asRoot = userInfo().uid === 0;
  // As root, run the server's commands as `postgres`; otherwise as ourselves. The server inherits `SERVER_ENV`.
  const env = serverEnvironment(process.env);
  const run = (cmd: string, args: string[]) => {
    const file = join(bin, cmd);
    const result = asRoot
      ? spawnSync('runuser', ['-u', 'postgres', '--', file, ...args], { encoding: 'utf8', env })
      : spawnSync(file, args, { encoding: 'utf8', env });
    return result;
  };
  const must = (cmd: string, args: string[]) => {
    const r = run(cmd, args);
    if (r.status !== 0) throw new Error(`${cmd} failed: ${(r.stderr || r.stdout || '').trim()}`);
    return r.stdout;
  };

  mkdirSync(root, { recursive: true });
  for (const dir of [pgdata, sockets]) mkdirSync(dir, { recursive: true });
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
    for (const dir of [root, pgdata, sockets]) chownSync(dir, uid, gid);
    // The folders above `root` stay as they are; the server cannot start when one of them shuts `postgres` out.
    if (spawnSync('runuser', ['-u', 'postgres', '--', 'test', '-w', root, '-a', '-x', root]).status !== 0) {
      throw new Error(`the postgres user cannot reach ${root}: make that folder's parents searchable by it (for example chmod o+x on each), or choose another DATA_DIR`);
    }
  }
  chmodSync(pgdata, 0o700);
  chmodSync(sockets, 0o700);

  if (!existsSync(join(pgdata, 'PG_VERSION'))) {
    options.log?.(`creating a private PostgreSQL cluster in ${pgdata}`);
    must('initdb', ['-D', pgdata, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8']);
    const settings = [
      "listen_addresses = ''",
      `unix_socket_directories = '${sockets}'`,
      'max_connections = 200',
      'shared_buffers = 256MB',
      ...(options.fast ? ['fsync = off', 'synchronous_commit = off', 'full_page_writes = off'] : []),
    ];
    writeFileSync(join(pgdata, 'postgresql.auto.conf'), settings.join('\n') + '\n');
  }

  const wasRunning = run('pg_ctl', ['-D', pgdata, 'status']).status === 0;
  if (!wasRunning) {
    must('pg_ctl', ['-D', pgdata, '-l', join(pgdata, 'server.log'), '-w', '-t', '60', 'start']);
  }

  const port = readFileSync(join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[3]?.trim() || '5432';
  const url = (db: string) => `postgresql://postgres@localhost/${db}?host=${encodeURIComponent(sockets)}&port=${port}`;
  const psql = (sql: string, db = 'postgres') =>
    execFileSync(join(bin, 'psql'), ['-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-h', sockets, '-p', port, '-U', 'postgres', '-d', db, '-c', sql], {
      encoding: 'utf8',
    });
  if (psql(`SELECT 1 FROM pg_database WHERE datname = '${name}'`).trim() !== '1') {
    psql(`CREATE DATABASE "${name}"`);
  }
  psql('CREATE EXTENSION IF NOT EXISTS postgis', name);

  return {
    url,
    wasRunning,
    stop() {
      run('pg_ctl', ['-D', pgdata, '-m', 'fast', '-w', 'stop']);
    },
  };
}
