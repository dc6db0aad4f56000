/**
 * `npm run bench:rules`: device reports per second through ingest while
 * active device-triggered rules and `onChange` calculations follow them,
 * beside the same ingest with neither, in the same run.
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform
 *   runs as its own process (`api/main.ts`), the publishers run here.
 * - `DEVICES` devices on their own reserved topics, over `CONNECTIONS`
 *   credentials sets; one QoS 1 connection per set keeping `WINDOW` messages
 *   in flight; a PUBACK means the report is stored, so acknowledged messages
 *   per second is the ingest rate. Reports are `{temperature}` with values
 *   0 to 99 in turn.
 * - The `with` phases run with every load of `LOADS` set up:
 *   - 100 rules, each triggered by the temperature of one of the first 100
 *     devices, with a condition (above 89: one report in ten) leading to a
 *     log action, so one report in twenty runs a rule;
 *   - 100 `onChange` window calculations, one on each of the other 100
 *     devices (the mean of its temperature over the last hour, written back
 *     to it as `temperatureMean1h`), so every report of those stores one
 *     result report.
 *   The `none` phases run with no load at all. Phases alternate (none, with,
 *   none, with) so the machine's drift hits both.
 * - After each `with` phase, per load: how long its reactor needed to catch
 *   up with the log (`catchUpMsAfterPhase`) and the work it did in the phase
 *   (rule runs decided; calculation results stored, beside the reports that
 *   set them off, which they must equal).
 *
 * - Per phase, the CPU time each process spent per accepted report
 *   (`cpuPerReport`: the platform, PostgreSQL's whole cluster, this load
 *   generator), from the phase's start until every subscriber of the log
 *   has caught up after it, so the reactors' work on the phase counts too.
 *
 * `BENCH_LOADS=onChangeCalculations` (names, comma-separated) runs only those
 * loads, to tell what each one costs.
 *
 * A further load is one more entry of `LOADS`: a name, its reactor's
 * checkpoint, and a set-up that returns how to count its work and clean up.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MqttClient } from 'mqtt';
import pg from 'pg';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { caughtUp, connectMqtt, cpuMeter, reserveTopics, startPlatformProcess, type CpuPerMessage, type PlatformProcess } from './processes.js';
import { createCalculationLoad, deleteCalculationLoad } from './calculationLoad.js';

const SECONDS = Number(process.env.BENCH_RULES_SECONDS ?? 8);
/** Pairs of phases (none, then with); `BENCH_ROUNDS` sets more, for a mean that the machine's noise moves less. */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const CONNECTIONS = 4;
const DEVICES = 200;
const WINDOW = 64;
const RULES = 100;
const CALCULATIONS = 100;

type Call = PlatformProcess['call'];

/** The work a load's reactor did so far, as counters read from the event log. */
type Work = Record<string, number>;

/** A load the `with` phases run under: set up before the phase, cleaned up after it. */
interface Load {
  name: string;
  /** The checkpoint of the reactor that follows the load. */
  reactor: string;
  setUp(call: Call, devices: { _id: string }[], db: pg.Pool): Promise<{ work(): Promise<Work>; cleanUp(): Promise<void> }>;
}

const count = async (db: pg.Pool, query: string, params: unknown[] = []) => Number((await db.query<{ n: string }>(query, params)).rows[0]!.n);

const ALL_LOADS: Load[] = [
  {
    name: 'deviceTriggeredRules',
    reactor: 'rules',
    async setUp(call, devices, db) {
      const ids: string[] = [];
      for (const device of devices.slice(0, RULES)) {
        const rule = await call('POST', '/api/rules-v2', {
          name: `bench.${device._id}`,
          definition: {
            nodes: [
              { id: 'report', type: 'trigger', config: { resourceType: 'device', deviceId: device._id, fields: ['temperature'] } },
              { id: 'hot', type: 'condition', config: { deviceId: device._id, field: 'temperature', operator: 'gt', value: 89 } },
              { id: 'note', type: 'action', config: { action: 'log', message: 'hot', type: 'warning' } },
            ],
            edges: [
              { from: 'report', to: 'hot' },
              { from: 'hot', to: 'note' },
            ],
          },
        });
        ids.push(rule._id);
      }
      return {
        work: async () => ({ runsDecided: await count(db, "SELECT count(*)::text AS n FROM es.events WHERE type = 'RuleRunStarted'") }),
        cleanUp: async () => {
          for (const id of ids) await call('DELETE', `/api/rules-v2/${id}`);
        },
      };
    },
  },
  {
    name: 'onChangeCalculations',
    reactor: 'calculations',
    async setUp(call, devices, db) {
      const sources = devices.slice(RULES, RULES + CALCULATIONS).map((d) => `device-${d._id}`);
      const ids = await createCalculationLoad(call, devices.slice(RULES, RULES + CALCULATIONS).map((d) => d._id), 'temperature');
      return {
        work: async () => ({
          resultsStored: await count(db, "SELECT count(*)::text AS n FROM es.events WHERE type = 'DeviceReported' AND metadata->>'actor' LIKE 'calculation:%'"),
          reportsOfSources: await count(db, "SELECT count(*)::text AS n FROM es.events WHERE type = 'DeviceReported' AND stream_id = ANY($1::text[]) AND metadata->>'actor' NOT LIKE 'calculation:%'", [sources]),
        }),
        cleanUp: () => deleteCalculationLoad(call, ids),
      };
    },
  },
];

const chosen = process.env.BENCH_LOADS?.split(',');
const LOADS = chosen ? ALL_LOADS.filter((l) => chosen.includes(l.name)) : ALL_LOADS;
if (LOADS.length === 0) throw new Error(`BENCH_LOADS names none of ${ALL_LOADS.map((l) => l.name).join(', ')}`);

const connect = (port: number, username: string, password: string) => connectMqtt(port, { username, password });

const reports = Array.from({ length: 100 }, (_r, i) => JSON.stringify({ temperature: i }));

/**
 * Publishes for SECONDS; acknowledged messages, and per second over the whole
 * phase and over its second half (`laterPerSecond`: what is left once a
 * load's start, such as seeding the calculations' windows, is behind it).
 */
async function phase(clients: MqttClient[], topics: string[][]): Promise<{ acked: number; perSecond: number; laterPerSecond: number }> {
  const started = Date.now();
  const until = started + SECONDS * 1000;
  const half = started + SECONDS * 500;
  let acked = 0;
  const mark = { acked: 0, at: started };
  await Promise.all(
    clients.map(async (client, c) => {
      let next = c * 7;
      const lane = async () => {
        while (Date.now() < until) {
          const i = next++;
          await client.publishAsync(topics[c]![i % topics[c]!.length]!, reports[i % reports.length]!, { qos: 1 });
          acked++;
          const now = Date.now();
          if (mark.at < half && now >= half) Object.assign(mark, { acked, at: now });
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  const ended = Date.now();
  return { acked, perSecond: acked / ((ended - started) / 1000), laterPerSecond: (acked - mark.acked) / ((ended - mark.at) / 1000) };
}

/**
 * `BENCH_STATEMENTS=<n>`: the platform's `n` most called statements (from
 * `pg_stat_statements`), calls and execution time per accepted report, over
 * the `none` phases and over the `with` phases (each up to its catch-up).
 */
const STATEMENTS = Number(process.env.BENCH_STATEMENTS ?? 0);

type Statements = Map<string, { calls: number; ms: number }>;

async function statements(db: pg.Pool, into: Statements): Promise<void> {
  if (!STATEMENTS) return;
  const { rows } = await db.query<{ query: string; calls: string; ms: number }>(
    "SELECT query, calls::text, total_exec_time AS ms FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
  );
  for (const r of rows) {
    const key = r.query.replace(/\s+/g, ' ').slice(0, 160);
    const was = into.get(key) ?? { calls: 0, ms: 0 };
    into.set(key, { calls: was.calls + Number(r.calls), ms: was.ms + r.ms });
  }
  await db.query('SELECT pg_stat_statements_reset()');
}

/** The most called statements, and those that took the longest. */
const perReport = (s: Statements, reports: number) => {
  const top = (by: (v: { calls: number; ms: number }) => number) =>
    [...s]
      .sort((a, b) => by(b[1]) - by(a[1]))
      .slice(0, STATEMENTS)
      .map(([query, v]) => ({ callsPerReport: Math.round((v.calls / reports) * 1000) / 1000, execUsPerReport: Math.round((v.ms * 1000) / reports), query }));
  return { byCalls: top((v) => v.calls), byTime: top((v) => v.ms) };
};

const METRICS_TOKEN = 'bench-rules-metrics-token-0123456789';

export async function measureRules() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-rules-'));
  let cluster = startPrivateCluster(dir, 'bench');
  if (STATEMENTS) {
    // pg_stat_statements needs the library loaded at the server's start.
    const once = new pg.Client({ connectionString: cluster.url('bench') });
    await once.connect();
    await once.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
    await once.end();
    cluster.stop();
    cluster = startPrivateCluster(dir, 'bench');
  }
  const db = new pg.Pool({ connectionString: cluster.url('bench'), max: 2 });
  if (STATEMENTS) await db.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  let child: ChildProcess | null = null;
  try {
    const platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'), { METRICS_TOKEN });
    child = platform.child;
    const { call } = platform;
    const sets = await reserveTopics(call, 'd', DEVICES, CONNECTIONS);
    const topics = sets.map((s) => s.topics);
    const clients = await Promise.all(sets.map((s) => connect(platform.ports.mqtt!, s.username, s.password)));
    await Promise.all(clients.flatMap((client, c) => topics[c]!.map((topic) => client.publishAsync(topic, '{"temperature":0}', { qos: 1 }))));
    let devices: { _id: string }[] = [];
    for (let tries = 0; devices.length < DEVICES && tries < 100; tries++) {
      devices = await call<{ _id: string }[]>('GET', `/api/iotnodes?limit=1000&fields=_id&orderBy=createdAt`);
      if (devices.length < DEVICES) await new Promise((r) => setTimeout(r, 200));
    }
    await phase(clients, topics);

    const none: number[] = [];
    const withLoads: number[] = [];
    const later = { none: [] as number[], with: [] as number[] };
    const reactors: Record<string, { catchUpMsAfterPhase: number[]; perPhase: Work[] }> = Object.fromEntries(LOADS.map((l) => [l.name, { catchUpMsAfterPhase: [], perPhase: [] }]));
    const cpu: { none: CpuPerMessage[]; with: CpuPerMessage[] } = { none: [], with: [] };
    const pgData = join(dir, 'pg');
    const every = /[^"]+/;
    const stmts = { none: new Map() as Statements, with: new Map() as Statements };
    const counted = { none: 0, with: 0 };
    for (let round = 0; round < ROUNDS; round++) {
      await caughtUp(platform.ports.http!, METRICS_TOKEN, every, db);
      await statements(db, new Map());
      let meter = cpuMeter(platform.child.pid!, pgData);
      const plain = await phase(clients, topics);
      await caughtUp(platform.ports.http!, METRICS_TOKEN, every, db);
      await statements(db, stmts.none);
      counted.none += plain.acked;
      none.push(plain.perSecond);
      later.none.push(plain.laterPerSecond);
      cpu.none.push(meter.per(plain.acked, 'none'));
      const set = [];
      for (const load of LOADS) set.push(await load.setUp(call, devices, db));
      for (const load of LOADS) await caughtUp(platform.ports.http!, METRICS_TOKEN, load.reactor, db);
      await caughtUp(platform.ports.http!, METRICS_TOKEN, every, db);
      const before = await Promise.all(set.map((s) => s.work()));
      await statements(db, new Map());
      meter = cpuMeter(platform.child.pid!, pgData);
      const loaded = await phase(clients, topics);
      withLoads.push(loaded.perSecond);
      later.with.push(loaded.laterPerSecond);
      // Each reactor's catch-up counts from the end of the phase.
      const caught = await Promise.all(LOADS.map((load) => caughtUp(platform.ports.http!, METRICS_TOKEN, load.reactor, db)));
      await caughtUp(platform.ports.http!, METRICS_TOKEN, every, db);
      cpu.with.push(meter.per(loaded.acked, 'with'));
      await statements(db, stmts.with);
      counted.with += loaded.acked;
      for (const [i, load] of LOADS.entries()) {
        reactors[load.name]!.catchUpMsAfterPhase.push(caught[i]!);
        const after = await set[i]!.work();
        reactors[load.name]!.perPhase.push(Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[i]![k]!])));
      }
      for (const s of set) await s.cleanUp();
    }
    await Promise.all(clients.map((c) => c.endAsync()));
    const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
    const meanCpu = (xs: CpuPerMessage[]) => ({ server: mean(xs.map((x) => x.server)), postgres: mean(xs.map((x) => x.postgres ?? 0)), loadGenerator: mean(xs.map((x) => x.loadGenerator)) });
    const ratioOf = (loaded: number[], plain: number[]) => Math.round((mean(loaded) / mean(plain)) * 1000) / 1000;
    const ratio = ratioOf(withLoads, none);
    return {
      seconds: SECONDS,
      rounds: ROUNDS,
      devices: DEVICES,
      connections: CONNECTIONS,
      inFlightPerConnection: WINDOW,
      loads: LOADS.map((l) => l.name),
      rules: RULES,
      calculations: CALCULATIONS,
      acceptedPerSecond: { none: mean(none), with: mean(withLoads) },
      samples: { none, with: withLoads },
      // The second half of each phase: the loads' start (windows seeded, rights looked up) behind them.
      laterHalf: { acceptedPerSecond: { none: mean(later.none), with: mean(later.with) }, ratioWithToNone: ratioOf(later.with, later.none) },
      ratioWithToNone: ratio,
      cpuPerReport: { none: meanCpu(cpu.none), with: meanCpu(cpu.with), samples: cpu },
      reactors,
      ...(STATEMENTS ? { statements: { none: perReport(stmts.none, counted.none), with: perReport(stmts.with, counted.with) } } : {}),
      aim: { ratioAtLeast: 0.7, met: ratio >= 0.7 },
    };
  } finally {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => setTimeout(r, 2000));
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    await db.end();
    cluster.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(JSON.stringify({ benchmark: 'rules', ...(await measureRules()) }, null, 2));
}
