import { spawn, type ChildProcess } from 'node:child_process';
import { appendFileSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import type pg from 'pg';

const ROOT = new URL('../..', import.meta.url).pathname;

/** Node's flags for the platform as `npm start` gives them (the young generation's size, tsx), so a benchmark runs what production runs. */
const START_FLAGS = (() => {
  const start = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start.split(/\s+/);
  return start[0] === 'node' ? start.slice(1, start.indexOf('api/main.ts')) : ['--import', 'tsx'];
})();

export interface Ports {
  http?: number;
  mqtt?: number;
}

/**
 * Runs `node --import tsx <args>` from the repository root as a process of its
 * own, so a benchmark's load generator never shares the server's event loop.
 * Resolves with the ports its JSON log says it listens on, once `ready` holds
 * (by default: both HTTP and MQTT). For the platform (`api/main.ts`):
 * `BENCH_PROFILE=<dir>` CPU-profiles it into that folder (and the phases of
 * the load are noted beside it, see `cpuMeter`), `BENCH_NODE_FLAGS` adds
 * Node flags (`--trace-gc-nvp`, `--heap-prof`, …) and
 * `BENCH_PLATFORM_LOG=<file>` keeps its standard output (its log and what
 * such flags print) in a file.
 */
export function spawnProcess(
  args: string[],
  env: Record<string, string>,
  ready: (ports: Ports) => boolean = (p) => p.http !== undefined && p.mqtt !== undefined,
): Promise<{ child: ChildProcess; ports: Ports }> {
  return new Promise((resolve, reject) => {
    const platform = args[0] === 'api/main.ts';
    const extra = platform && process.env.BENCH_NODE_FLAGS ? process.env.BENCH_NODE_FLAGS.split(/\s+/).filter(Boolean) : [];
    const flags = platform ? [...extra, ...START_FLAGS] : ['--import', 'tsx'];
    const logFile = platform ? process.env.BENCH_PLATFORM_LOG : undefined;
    const profile = process.env.BENCH_PROFILE && platform ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
    const child = spawn(process.execPath, [...profile, ...flags, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    const ports: Ports = {};
    let buffer = '';
    child.stdout!.on('data', (chunk) => {
      buffer += chunk;
      if (logFile) appendFileSync(logFile, chunk);
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as { msg?: string; port?: number };
          if (entry.msg === 'HTTP listening') ports.http = entry.port;
          if (entry.msg === 'MQTT listening') ports.mqtt = entry.port;
          if (ready(ports)) resolve({ child, ports });
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}

export const BENCH_ADMIN = { username: 'admin', password: 'admin-password-1' };

export interface PlatformProcess {
  child: ChildProcess;
  ports: Ports;
  /** The admin's bearer token. */
  token: string;
  /** A REST call as the admin, answering the parsed body (default: a created resource); throws on any status of 300 or more. */
  call<T = { _id: string }>(method: string, path: string, body?: unknown): Promise<T>;
  stop(): Promise<void>;
}

/** The platform (`api/main.ts`) as its own process on `databaseUrl`, with an admin logged in; `env` adds settings (METRICS_TOKEN, …). */
export async function startPlatformProcess(databaseUrl: string, dataDir: string, env: Record<string, string> = {}): Promise<PlatformProcess> {
  const { child, ports } = await spawnProcess(['api/main.ts'], {
    // Channels' receivers and network-server stand-ins of the benchmarks listen on loopback.
    OUTBOUND_TARGETS: 'any',
    ...env,
    DATABASE_URL: databaseUrl,
    PORT: '0',
    MQTT_PORT: '0',
    DATA_DIR: dataDir,
    JWT_SECRET: 'bench-secret-that-is-long-enough-for-hs256-0123456789',
    ADMIN_USERNAME: BENCH_ADMIN.username,
    ADMIN_PASSWORD: BENCH_ADMIN.password,
    LOG_LEVEL: 'info',
  });
  const base = `http://127.0.0.1:${ports.http}`;
  let token = '';
  const call = async <T = { _id: string }>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await fetch(base + path, { method, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
    return (text ? JSON.parse(text) : null) as T;
  };
  token = (await call<{ token: string }>('POST', '/api/auth/local', BENCH_ADMIN)).token;
  const stop = async () => {
    if (child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  return { child, ports, token, call, stop };
}

/** A credentials set and the reserved topics its connection publishes on. */
export interface Publisher {
  username: string;
  password: string;
  topics: string[];
}

/**
 * `connections` credentials sets (`<name>-<c>`), each reserving the topics
 * `svc/generic/v2/<name>/<prefix>-<d>` of every `connections`-th device d
 * below `devices`: the devices are spread evenly over the connections.
 */
export async function reserveTopics(call: PlatformProcess['call'], prefix: string, devices: number, connections: number, name = 'bench'): Promise<Publisher[]> {
  const publishers: Publisher[] = [];
  for (let c = 0; c < connections; c++) {
    const username = `${name}-${c}`;
    const password = `${name}-password-${c}`;
    const set = await call('POST', '/api/basic-credentials-sets', { username, password });
    const topics: string[] = [];
    for (let d = c; d < devices; d += connections) {
      const topic = `svc/generic/v2/${name}/${prefix}-${d}`;
      await call('POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set._id });
      topics.push(topic);
    }
    publishers.push({ username, password, topics });
  }
  return publishers;
}

/** An MQTT 3.1.1 client on the loopback port, connected (no reconnecting: a benchmark counts what a drop costs). */
export function connectMqtt(port: number, options: mqtt.IClientOptions = {}): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { reconnectPeriod: 0, protocolVersion: 4, ...options });
    c.once('connect', () => resolve(c));
    c.once('error', reject);
  });
}

/** Fields of `/proc/<pid>/stat` after the command name: [0] is the state, [1] the parent, [11..14] utime, stime, cutime, cstime. */
function stat(pid: number): string[] | null {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  } catch {
    return null;
  }
}

/** The CPU time the given fields of a process's stat count, in microseconds (Linux, 100 ticks a second). */
const micros = (f: string[] | null, fields: number[]): number => (f ? fields.reduce((sum, i) => sum + Number(f[i]), 0) * 10_000 : 0);

/** User + system CPU time of a process so far, in microseconds. */
export const cpuMicros = (pid: number): number => micros(stat(pid), [11, 12]);

/**
 * CPU time of a PostgreSQL cluster so far, in microseconds: the postmaster, every process it runs
 * now (backends, writers, WAL), and those that already ended (counted into the postmaster).
 */
export function postgresCpuMicros(dataDir: string): number {
  const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
  let total = micros(stat(postmaster), [11, 12, 13, 14]);
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const f = stat(Number(name));
    if (f && Number(f[1]) === postmaster) total += micros(f, [11, 12]);
  }
  return total;
}

/** CPU time per message of each process that took part in a run, in microseconds. */
export interface CpuPerMessage {
  server: number;
  postgres?: number;
  loadGenerator: number;
}

/** The clock of a V8 CPU profile's samples: monotonic microseconds, the same in every process of the machine. */
export const profileClock = (): number => Number(process.hrtime.bigint() / 1000n);

/** Where `cpuMeter` notes the phases of a profiled run: read by `npm run bench:phases` (test/bench/phases.ts). */
export const PHASES_FILE = 'phases.ndjson';

/**
 * Starts counting CPU time; `per(n, phase?)` answers what each process spent
 * since, per message of `n`. With `BENCH_PROFILE`, a `phase` name notes the
 * span counted and its messages in the profile's folder, so the platform's
 * profile can be cut into the phases of the load (`npm run bench:phases`).
 */
export function cpuMeter(serverPid: number, postgresDataDir?: string): { per(messages: number, phase?: string): CpuPerMessage } {
  const server = cpuMicros(serverPid);
  const postgres = postgresDataDir ? postgresCpuMicros(postgresDataDir) : 0;
  const own = process.cpuUsage();
  const from = profileClock();
  return {
    per(messages, phase) {
      const dir = process.env.BENCH_PROFILE;
      if (dir && phase) {
        mkdirSync(dir, { recursive: true });
        appendFileSync(join(dir, PHASES_FILE), `${JSON.stringify({ phase, pid: serverPid, from, to: profileClock(), messages })}\n`);
      }
      const n = Math.max(1, messages);
      const mine = process.cpuUsage(own);
      return {
        server: Math.round((cpuMicros(serverPid) - server) / n),
        ...(postgresDataDir ? { postgres: Math.round((postgresCpuMicros(postgresDataDir) - postgres) / n) } : {}),
        loadGenerator: Math.round((mine.user + mine.system) / n),
      };
    },
  };
}

/**
 * Waits until the subscriber `name` (a pattern: every one) of a platform started with `METRICS_TOKEN` has handled every event stored when it is called (its lag on
 * `/metrics` is 0); the milliseconds it took. The lag counts the events a subscriber can read, and the
 * store's reads stop before the oldest transaction still in flight (so no event can land behind a
 * checkpoint): a lag read while an older transaction was open can be 0 with events of the phase still
 * to handle. So a lag of 0 counts only once every transaction up to the last event stored at the call
 * has ended.
 */
export async function caughtUp(http: number, metricsToken: string, name: string | RegExp, db: Pick<pg.Pool, 'query'>): Promise<number> {
  const started = Date.now();
  const { rows } = await db.query<{ x: string | null }>('SELECT max(transaction_id)::text AS x FROM es.events');
  const last = rows[0]!.x ?? '0';
  const pattern = new RegExp(`^platform_subscriber_lag_events\\{subscriber="${typeof name === 'string' ? name : name.source}"\\} (\\d+)$`, 'gm');
  for (;;) {
    const visible = await db.query<{ v: boolean }>('SELECT pg_snapshot_xmin(pg_current_snapshot()) > $1::xid8 AS v', [last]);
    if (visible.rows[0]!.v) {
      const res = await fetch(`http://127.0.0.1:${http}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } });
      const lags = [...(await res.text()).matchAll(pattern)];
      if (lags.length && lags.every((lag) => Number(lag[1]) === 0)) return Date.now() - started;
    }
    if (Date.now() - started > 120_000) return Number.NaN;
    await new Promise((r) => setTimeout(r, 50));
  }
}
