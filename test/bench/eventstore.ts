/**
 * `npm run bench:eventstore`: the PostgreSQL event store's throughput on a
 * private cluster with durability on (fsync, synchronous commit), next to a
 * baseline measured in the same run: plain single-row INSERT commits into an
 * unindexed table. Then what the audit log's two indexes on the log cost:
 * PostgreSQL's CPU time per event of the batch append ingest makes (one event
 * on each of 100 device streams), against the same append into a store without
 * them. Then what time-ordered event ids save: the same append with
 * version 7 ids (`newEventId`) against random version 4 ids, each into a
 * store already holding `ID_PREFILL` events. Prints one JSON object on
 * stdout; progress goes to stderr.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { startPrivateCluster } from '../../migrations/cluster.js';
import { migrateToLatest } from '../../migrations/index.js';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import { postgresCpuMicros } from './processes.js';
import { newEventId } from '../../domain/shared/ids.js';
import type { EventStore, ExpectedRevision } from '../../domain/eventstore/port.js';
import type { NewEvent } from '../../domain/shared/events.js';

const WRITERS = 8;
const PHASE_MS = Number(process.env.BENCH_PHASE_MS ?? 4000);
const ROUNDS = 2;
const BATCH = 100;
const CATCH_UP_MIN = 100_000;
const CATCH_UP_BATCH = 1000; // what the projection runner asks for
const AUDIT_ROUNDS = 6;
const AUDIT_APPENDS = 200; // per round and store, of BATCH events each
const ID_PREFILL = Number(process.env.BENCH_ID_PREFILL ?? 300_000); // events in each store before the event-id rounds

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

/** The events of one command: own ids, one correlation id and time, as the write path makes them. */
function command(size: number, i: number): NewEvent[] {
  const metadata = { actor: 'system:bench', correlationId: randomUUID(), time: new Date().toISOString() };
  return Array.from({ length: size }, (_, k) => ({
    id: randomUUID(),
    type: 'MeasurementReceived',
    data: { deviceId: '65a1f0c2e4b0a1b2c3d4e5f6', temperature: 20 + ((i + k) % 10) / 10, humidity: 40 + ((i + k) % 7), battery: 3.1 },
    metadata,
  }));
}

/** Runs `writers` loops for `ms`; each call of `step` returns how many units it did. */
async function timed(ms: number, writers: number, step: (writer: number) => Promise<number>): Promise<{ units: number; seconds: number }> {
  const started = performance.now();
  const until = started + ms;
  const done = await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      let n = 0;
      while (performance.now() < until) n += await step(w);
      return n;
    }),
  );
  return { units: done.reduce((a, b) => a + b, 0), seconds: (performance.now() - started) / 1000 };
}

/** Ingest's batch append: one report on each of `BATCH` device streams, each with its own correlation id, from 10 credentials sets. */
function reports(store: EventStore, newId: () => string = randomUUID) {
  let i = 0;
  return () => {
    const appends = Array.from({ length: BATCH }, () => {
      const n = i++;
      const metadata = { actor: `credentials:65a1f0c2e4b0a1b2c3d4e5f${n % 10}`, correlationId: `mqtt:${randomUUID().slice(0, 16)}:${n}:client-${n % 10}`, time: new Date().toISOString() };
      const data = { id: `device-${n % 1000}`, topic: `svc/generic/v2/bench/device-${n % 1000}`, path: [], payload: { power: n % 100, seq: n }, reportedAt: metadata.time };
      return { streamId: `device-${n % 1000}-${Math.floor(n / 1000)}`, events: [{ id: newId(), type: 'DeviceReported', data, metadata }] };
    });
    return store.appendMany!(appends);
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const rate = (runs: { units: number; seconds: number }[]) =>
  runs.reduce((a, r) => a + r.units, 0) / runs.reduce((a, r) => a + r.seconds, 0);

/** Each writer appends to its own streams, with the expected revision it tracks. */
function writer(store: EventStore, name: string, size: number) {
  const revisions = new Map<string, number>();
  let i = 0;
  return async (w: number) => {
    const stream = `${name}-${w}-${i++ % 16}`;
    const expected: ExpectedRevision = revisions.get(stream) ?? 'no_stream';
    const events = command(size, i);
    const result = await store.append(stream, events, expected);
    revisions.set(stream, result.nextRevision);
    return size;
  };
}

// Other work on the machine moves every figure; the load average says how much there was.
const loadAtStart = loadavg()[0]!;
const dir = mkdtempSync(join(tmpdir(), 'platform-bench-'));
log(`starting a private cluster with durability on in ${dir}`);
const cluster = startPrivateCluster(dir, 'bench');
const cleanup = () => {
  cluster.stop();
  rmSync(dir, { recursive: true, force: true });
};
process.once('SIGINT', () => {
  cleanup();
  process.exit(130);
});

const pool = new pg.Pool({ connectionString: cluster.url('bench'), max: WRITERS + 1 });
try {
  const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: cluster.url('bench'), max: 2 }) }) });
  await migrateToLatest(db);
  await db.destroy();
  const settings = Object.fromEntries(
    (await pool.query<{ name: string; setting: string }>(`SELECT name, setting FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method')`)).rows.map(
      (r) => [r.name, r.setting],
    ),
  );
  const store = createPostgresStore(pool);

  await pool.query('CREATE TABLE bench_baseline (writer int, n bigint, at timestamptz DEFAULT now())');
  // The baseline's own connections, so the store keeps its whole pool.
  const plain = new pg.Pool({ connectionString: cluster.url('bench'), max: WRITERS });
  const clients = await Promise.all(Array.from({ length: WRITERS }, () => plain.connect()));
  const insert = async (w: number) => {
    await clients[w]!.query('INSERT INTO bench_baseline (writer, n) VALUES ($1, $2)', [w, Date.now()]);
    return 1;
  };
  const single = writer(store, 'single', 1);
  // Alternating rounds, so a load that comes and goes on the machine hits both alike.
  const baselineRuns = [];
  const appendRuns = [];
  for (let round = 1; round <= ROUNDS; round++) {
    log(`round ${round}/${ROUNDS}: baseline single-row INSERT commits into an unindexed table`);
    baselineRuns.push(await timed(PHASE_MS, WRITERS, insert));
    log(`round ${round}/${ROUNDS}: single-event appends`);
    appendRuns.push(await timed(PHASE_MS, WRITERS, single));
  }
  for (const c of clients) c.release();
  await plain.end();
  const baseline = rate(baselineRuns);
  const appends = rate(appendRuns);

  log(`${BATCH}-event appends`);
  const batched = rate([await timed(PHASE_MS, WRITERS, writer(store, 'batch', BATCH))]);

  let total = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM es.events')).rows[0]!.n);
  if (total < CATCH_UP_MIN) {
    log(`topping the store up to ${CATCH_UP_MIN} events`);
    const fill = writer(store, 'fill', BATCH);
    await Promise.all(
      Array.from({ length: WRITERS }, async (_, w) => {
        while (total < CATCH_UP_MIN) total += await fill(w);
      }),
    );
    total = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM es.events')).rows[0]!.n);
  }

  log(`subscription catch-up over ${total} events`);
  let received = 0;
  const started = performance.now();
  let finished = 0;
  await new Promise<void>((resolve, reject) => {
    const subscription = store.subscribe({ after: null, batchSize: CATCH_UP_BATCH, onError: reject }, async (batch) => {
      received += batch.length;
      if (received >= total && !finished) {
        finished = performance.now();
        void subscription.stop().then(resolve);
      }
    });
  });
  const catchUp = received / ((finished - started) / 1000);

  const pgdata = join(dir, 'pg');
  /** Another database of the cluster with the platform's schema, and one connection to it. */
  const database = async (name: string): Promise<pg.Pool> => {
    await pool.query(`CREATE DATABASE ${name}`);
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: cluster.url(name), max: 1 }) }) });
    await migrateToLatest(db);
    await db.destroy();
    return new pg.Pool({ connectionString: cluster.url(name), max: 1 });
  };
  /**
   * PostgreSQL µs per event of each lane's appends, by round, the lanes' order
   * reversed every other round; the first round warms each database up (its
   * caches, its plans, its first pages) and is not counted.
   */
  const perEventByRound = async <K extends string>(lanes: Record<K, () => Promise<unknown>>): Promise<Record<K, number[]>> => {
    const names = Object.keys(lanes) as K[];
    const out = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>;
    for (let r = 0; r < AUDIT_ROUNDS; r++) {
      for (const lane of r % 2 ? [...names].reverse() : names) {
        const before = postgresCpuMicros(pgdata);
        for (let k = 0; k < AUDIT_APPENDS; k++) await lanes[lane]();
        if (r > 0) out[lane].push(Math.round(((postgresCpuMicros(pgdata) - before) / (AUDIT_APPENDS * BATCH)) * 10) / 10);
      }
    }
    return out;
  };

  // The same appends into a second database of the same cluster without the audit indexes, alternating rounds,
  // each store's own table grown alike, so both pay the same for their size.
  log('the audit indexes: batch appends with and without them');
  const bare = await database('bench_unindexed');
  await bare.query('DROP INDEX es.events_correlation, es.events_actor');
  const one = new pg.Pool({ connectionString: cluster.url('bench'), max: 1 });
  const perEvent = await perEventByRound({ indexed: reports(createPostgresStore(one)), unindexed: reports(createPostgresStore(bare)) });
  await one.end();
  await bare.end();

  // Random against time-ordered event ids: two more databases, each grown to ID_PREFILL events with its own kind of id first.
  log(`event ids: batch appends with random (v4) and time-ordered (v7) ids, after ${ID_PREFILL} events each`);
  const randomIds = await database('bench_ids_random');
  const orderedIds = await database('bench_ids_ordered');
  const idLanes = { random: reports(createPostgresStore(randomIds), randomUUID), ordered: reports(createPostgresStore(orderedIds), newEventId) };
  for (const append of Object.values(idLanes)) for (let n = 0; n < ID_PREFILL; n += BATCH) await append();
  await pool.query('CHECKPOINT');
  const idPerEvent = await perEventByRound(idLanes);
  await randomIds.end();
  await orderedIds.end();

  const round = (x: number) => Math.round(x);
  const ratio = Math.round((appends / baseline) * 100) / 100;
  console.log(
    JSON.stringify(
      {
        durability: settings,
        machine: { cores: cpus().length, loadAverage1mAtStart: Math.round(loadAtStart * 100) / 100 },
        writers: WRITERS,
        secondsPerPhase: PHASE_MS / 1000,
        roundsOfBaselineAndAppends: ROUNDS,
        singleEventAppendsPerSec: round(appends),
        baselineInsertCommitsPerSec: round(baseline),
        appendsToBaseline: ratio,
        batchedEventsPerSec: round(batched),
        eventsPerBatchedAppend: BATCH,
        catchUpEventsPerSec: round(catchUp),
        catchUpEvents: received,
        catchUpBatchSize: CATCH_UP_BATCH,
        auditIndexes: {
          what: `PostgreSQL CPU µs per event, appends of ${BATCH} reports on ${BATCH} streams, one connection, by round`,
          withThem: perEvent.indexed,
          withoutThem: perEvent.unindexed,
          medianRatio: Math.round((median(perEvent.indexed) / median(perEvent.unindexed)) * 100) / 100,
        },
        eventIds: {
          what: `PostgreSQL CPU µs per event, appends of ${BATCH} reports on ${BATCH} streams, one connection, by round, into a store of ${ID_PREFILL} events or more`,
          random: idPerEvent.random,
          timeOrdered: idPerEvent.ordered,
          medianRatio: Math.round((median(idPerEvent.ordered) / median(idPerEvent.random)) * 100) / 100,
        },
        aims: {
          appends5000: appends >= 5000,
          halfOfBaseline: ratio >= 0.5,
          batched50000: batched >= 50_000,
          catchUp50000: catchUp >= 50_000,
        },
      },
      null,
      2,
    ),
  );
} finally {
  await pool.end();
  cleanup();
}
