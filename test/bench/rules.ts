/**
 * `npm run bench:rules`: device reports per second through ingest while
 * active device-triggered rules follow them, beside the same ingest with
 * none, in the same run.
 *
 * - Its own throw-away PostgreSQL cluster with durability on; the platform
 *   runs as its own process (`api/main.ts`), the publishers run here.
 * - `DEVICES` devices on their own reserved topics, over `CONNECTIONS`
 *   credentials sets; one QoS 1 connection per set keeping `WINDOW` messages
 *   in flight; a PUBACK means the report is stored, so acknowledged messages
 *   per second is the ingest rate. Reports are `{temperature}` with values
 *   0 to 99 in turn.
 * - The `with` phases run with every load of `LOADS` set up: 100 rules, each
 *   triggered by the temperature of one of the devices, with a condition
 *   (above 89: one report in ten) leading to a log action, so one report in
 *   twenty runs a rule. The `none` phases run with no load at all. Phases
 *   alternate (none, with, none, with) so the machine's drift hits both.
 * - After each `with` phase, how long the rules reactor needed to catch up
 *   with the log (`catchUpMs`), and how many runs it decided.
 *
 * Another load (the calculations of issue 13, 100 `onChange` calculations) is
 * one more entry of `LOADS`: a name, and a set-up that returns its clean-up.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type MqttClient } from 'mqtt';
import pg from 'pg';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { startPlatformProcess, type PlatformProcess } from './processes.js';

const SECONDS = Number(process.env.BENCH_RULES_SECONDS ?? 8);
const ROUNDS = 2;
const CONNECTIONS = 4;
const DEVICES = 200;
const WINDOW = 64;
const RULES = 100;

type Call = PlatformProcess['call'];

/** A load the `with` phases run under: set up before the phase, cleaned up after it. */
interface Load {
  name: string;
  setUp(call: Call, devices: { _id: string }[]): Promise<() => Promise<void>>;
}

const LOADS: Load[] = [
  {
    name: 'deviceTriggeredRules',
    async setUp(call, devices) {
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
      return async () => {
        for (const id of ids) await call('DELETE', `/api/rules-v2/${id}`);
      };
    },
  },
];

const connect = (port: number, username: string, password: string) =>
  new Promise<MqttClient>((resolve, reject) => {
    const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username, password, reconnectPeriod: 0, protocolVersion: 4 });
    c.once('connect', () => resolve(c));
    c.once('error', reject);
  });

const reports = Array.from({ length: 100 }, (_r, i) => JSON.stringify({ temperature: i }));

/** Publishes for SECONDS; acknowledged messages per second. */
async function phase(clients: MqttClient[], topics: string[][]): Promise<number> {
  const started = Date.now();
  const until = started + SECONDS * 1000;
  let acked = 0;
  await Promise.all(
    clients.map(async (client, c) => {
      let next = c * 7;
      const lane = async () => {
        while (Date.now() < until) {
          const i = next++;
          await client.publishAsync(topics[c]![i % topics[c]!.length]!, reports[i % reports.length]!, { qos: 1 });
          acked++;
        }
      };
      await Promise.all(Array.from({ length: WINDOW }, lane));
    }),
  );
  return acked / ((Date.now() - started) / 1000);
}

/** Waits until the subscriber `name` has passed every event stored now; the milliseconds it took. */
async function caughtUp(db: pg.Pool, name: string): Promise<number> {
  const started = Date.now();
  const { rows } = await db.query<{ c: string; p: string }>('SELECT transaction_id::text AS c, global_position::text AS p FROM es.events ORDER BY transaction_id DESC, global_position DESC LIMIT 1');
  const last = rows[0]!;
  for (;;) {
    const cp = await db.query<{ c: string; p: string }>('SELECT commit_position::text AS c, prepare_position::text AS p FROM es.checkpoints WHERE name = $1', [name]);
    const at = cp.rows[0];
    if (at && (BigInt(at.c) > BigInt(last.c) || (BigInt(at.c) === BigInt(last.c) && BigInt(at.p) >= BigInt(last.p)))) return Date.now() - started;
    if (Date.now() - started > 120_000) return Number.NaN;
    await new Promise((r) => setTimeout(r, 50));
  }
}

export async function measureRules() {
  const dir = mkdtempSync(join(tmpdir(), 'bench-rules-'));
  const cluster = startPrivateCluster(dir, 'bench');
  const db = new pg.Pool({ connectionString: cluster.url('bench'), max: 2 });
  let child: ChildProcess | null = null;
  try {
    const platform = await startPlatformProcess(cluster.url('bench'), join(dir, 'data'));
    child = platform.child;
    const { call } = platform;
    const topics = Array.from({ length: CONNECTIONS }, () => [] as string[]);
    const sets: { username: string; password: string }[] = [];
    for (let c = 0; c < CONNECTIONS; c++) {
      const username = `bench-${c}`;
      const password = `bench-password-${c}`;
      const set = await call('POST', '/api/basic-credentials-sets', { username, password });
      sets.push({ username, password });
      for (let d = c; d < DEVICES; d += CONNECTIONS) {
        const topic = `svc/generic/v2/bench/d-${d}`;
        await call('POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set._id });
        topics[c]!.push(topic);
      }
    }
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
    const catchUpMs: number[] = [];
    const runsDecided: number[] = [];
    const countRuns = async () => Number((await db.query<{ n: string }>("SELECT count(*)::text AS n FROM es.events WHERE type = 'RuleRunStarted'")).rows[0]!.n);
    for (let round = 0; round < ROUNDS; round++) {
      none.push(await phase(clients, topics));
      const cleanUps = [];
      for (const load of LOADS) cleanUps.push(await load.setUp(call, devices));
      await caughtUp(db, 'rules');
      const runsBefore = await countRuns();
      withLoads.push(await phase(clients, topics));
      catchUpMs.push(await caughtUp(db, 'rules'));
      runsDecided.push((await countRuns()) - runsBefore);
      for (const cleanUp of cleanUps) await cleanUp();
    }
    await Promise.all(clients.map((c) => c.endAsync()));
    const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
    const ratio = Math.round((mean(withLoads) / mean(none)) * 1000) / 1000;
    return {
      seconds: SECONDS,
      rounds: ROUNDS,
      devices: DEVICES,
      connections: CONNECTIONS,
      inFlightPerConnection: WINDOW,
      loads: LOADS.map((l) => l.name),
      rules: RULES,
      acceptedPerSecond: { none: mean(none), with: mean(withLoads) },
      samples: { none, with: withLoads },
      ratioWithToNone: ratio,
      rulesReactor: { catchUpMsAfterPhase: catchUpMs, runsDecidedPerPhase: runsDecided },
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
