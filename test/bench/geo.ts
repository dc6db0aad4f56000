/**
 * `npm run bench:geo`: the latency of `GET /api/iotnodes?geoquery=…` over
 * 100,000 devices with positions, for a small fence (about 100 hits) and a
 * fence over 10 % of the devices, next to the same PostGIS query issued
 * directly with `pg` in the same run. The platform runs as its own process
 * (`api/main.ts`) on a throw-away database. The devices are inserted straight into
 * the device read model (and their access rights into `access_rights`), not
 * through events: this measures reads only. Requests run one at a time over a
 * kept-alive connection, alternating with the direct query so both see the same
 * load; the page is the list's default (100, ordered by name). Each fence's
 * `usesGistIndex` (and the top-level one, for all fences) says whether the
 * direct query's plan reads the device point's GiST index.
 * Prints one JSON object on stdout; progress goes to stderr.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { startTestCluster, createTestDatabase } from '../support/cluster.js';
import { readableBy } from '../../api/access.js';
import type { Database } from '../../projections/database.js';
import { startPlatformProcess } from './processes.js';
import type { Principal } from '../../domain/access/principal.js';

const DEVICES = 100_000;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 400);
// Enough calls for the JIT to settle, so both sides are measured warm.
const WARMUP = 300;
const PAGE = 100;
/** Devices are spread evenly over 10° × 10°, so a fence's share of that area is its share of the devices. */
const AREA = { west: 0, south: 40, side: 10 };

const log = (line: string) => process.stderr.write(`bench: ${line}\n`);

/** The GiST index on the device point (`migrations/0005_devices.ts`) that a geoquery must be answered by. */
const POINT_INDEX = 'devices_lnglat';

/**
 * Whether a plan (EXPLAIN text) reads devices through the point index: an
 * index scan, index-only scan or bitmap index scan naming it.
 */
const scansIndex = (plan: string, index: string): boolean =>
  new RegExp(`Index (Only )?Scan (using|on) ${index}\\b`).test(plan);

const square = (side: number): number[][] => {
  const w = AREA.west + AREA.side / 2 - side / 2;
  const s = AREA.south + AREA.side / 2 - side / 2;
  const r = (x: number) => Number(x.toFixed(6));
  return [[r(w), r(s)], [r(w + side), r(s)], [r(w + side), r(s + side)], [r(w), r(s + side)], [r(w), r(s)]];
};

function percentiles(ms: number[]): { p50: number; p99: number; mean: number } {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  const round = (x: number) => Math.round(x * 1000) / 1000;
  return { p50: round(at(0.5)), p99: round(at(0.99)), mean: round(sorted.reduce((a, b) => a + b, 0) / sorted.length) };
}

/**
 * Runs the API call and the direct query alternately, so both see the same
 * load on a shared machine; the overhead is the median of the paired differences.
 */
async function measurePair(api: () => Promise<number>, direct: () => Promise<number>) {
  const rows = { api: 0, direct: 0 };
  for (let i = 0; i < WARMUP; i++) {
    rows.api = await api();
    rows.direct = await direct();
  }
  const times = { api: [] as number[], direct: [] as number[], diff: [] as number[] };
  for (let i = 0; i < SAMPLES; i++) {
    let started = performance.now();
    rows.api = await api();
    const a = performance.now() - started;
    started = performance.now();
    rows.direct = await direct();
    const d = performance.now() - started;
    times.api.push(a);
    times.direct.push(d);
    times.diff.push(a - d);
  }
  return {
    api: { ...percentiles(times.api), rows: rows.api },
    direct: { ...percentiles(times.direct), rows: rows.direct },
    pairedOverheadP50Ms: percentiles(times.diff).p50,
  };
}

const cluster = await startTestCluster();
const databaseUrl = await createTestDatabase();
const dataDir = mkdtempSync(join(tmpdir(), 'bench-geo-'));
// The platform in a process of its own, as in production: the requests made here never share its event loop.
const platform = await startPlatformProcess(databaseUrl, dataDir);
const httpPort = platform.ports.http!;
const client = new pg.Client({ connectionString: databaseUrl });
await client.connect();
const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 2 }) }) });
try {
  const admin = await db.selectFrom('users').select(['id', 'username', 'profile']).where('username', '=', 'admin').executeTakeFirstOrThrow();
  const principal: Principal = { id: admin.id, username: admin.username, roles: admin.profile.attributes.roles ?? [] };

  log(`inserting ${DEVICES} devices into the read model`);
  await sql`SELECT setseed(0.42)`.execute(db);
  await sql`INSERT INTO devices (id, doc, name, category, lnglat, created_by, revision, created_at, updated_at)
    SELECT p.id, jsonb_build_object('name', 'device ' || p.n, 'category', 'bench', 'lnglat', ST_AsGeoJSON(p.pt)::jsonb),
      'device ' || p.n, 'bench', p.pt, ${admin.id}, 0, now(), now()
    FROM (SELECT n, lpad(to_hex(n), 24, '0') AS id,
            ST_SetSRID(ST_MakePoint(${AREA.west} + random() * ${AREA.side}, ${AREA.south} + random() * ${AREA.side}), 4326) AS pt
          FROM generate_series(1, ${DEVICES}) n) p`.execute(db);
  await sql`INSERT INTO access_rights (resource_type, resource_id, subject_type, subject_id, scope)
    SELECT 'device', id, 'user', ${admin.id}, ARRAY['admin', 'write', 'read', 'peek'] FROM devices`.execute(db);
  await sql`ANALYZE devices`.execute(db);
  await sql`ANALYZE access_rights`.execute(db);

  const token = platform.token;

  const { rows: pointIndex } = await sql<{ indexdef: string }>`SELECT indexdef FROM pg_indexes WHERE tablename = 'devices' AND indexname = ${POINT_INDEX}`.execute(db);
  const pointIndexIsGist = /USING gist\b/i.test(pointIndex[0]?.indexdef ?? '');
  if (!pointIndexIsGist) log(`${POINT_INDEX} is missing or not a GiST index: ${pointIndex[0]?.indexdef ?? 'none'}`);

  const fences = { small: square(Math.sqrt((100 / DEVICES) * AREA.side ** 2)), tenPercent: square(Math.sqrt(0.1 * AREA.side ** 2)) };
  const result: Record<string, unknown> = {
    devices: DEVICES,
    devicesInsertedVia: 'read model (direct INSERT into devices and access_rights), not events',
    page: PAGE,
    samples: SAMPLES,
    query: 'GET /api/iotnodes?geoquery=type:contains;coordinates=… (default page, ordered by name), caller with a right on every device',
  };

  for (const [name, ring] of Object.entries(fences)) {
    const fence = JSON.stringify({ type: 'Polygon', coordinates: [ring] });
    const { rows: count } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM devices WHERE ST_Contains(ST_SetSRID(ST_GeomFromGeoJSON(${fence}), 4326), lnglat)`.execute(db);
    const url = `http://127.0.0.1:${httpPort}/api/iotnodes?geoquery=${encodeURIComponent(`type:contains;coordinates=${JSON.stringify(ring)}`)}`;
    // The list route's query: access filter, containment, its default order and page.
    const direct = sql<{ id: string; doc: unknown }>`SELECT id, doc FROM devices
      WHERE ${readableBy(principal, 'devices.id')} AND ST_Contains(ST_SetSRID(ST_GeomFromGeoJSON(${fence}), 4326), devices.lnglat)
      ORDER BY lower(name) ASC NULLS LAST, id LIMIT ${PAGE} OFFSET 0`.compile(db);

    const plan = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${direct.sql}`, direct.parameters as unknown[]);
    const planText = plan.rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
    const usesGistIndex = pointIndexIsGist && scansIndex(planText, POINT_INDEX);
    log(`${name}: plan of the direct query:\n${planText}`);
    if (!usesGistIndex) log(`${name}: the direct query does not use the GiST index ${POINT_INDEX}`);
    log(`${name}: ${count[0]!.n} devices inside; measuring the API and the direct query alternately`);
    const measured = await measurePair(
      async () => {
        const res = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
        if (res.status !== 200) throw new Error(`geoquery answered ${res.status}: ${await res.text()}`);
        return ((await res.json()) as unknown[]).length;
      },
      async () => (await client.query(direct.sql, direct.parameters as unknown[])).rowCount ?? 0,
    );
    result[name] = {
      fence: JSON.stringify(ring),
      hits: count[0]!.n,
      usesGistIndex,
      api: measured.api,
      direct: measured.direct,
      apiOverheadP50Ms: Math.round((measured.api.p50 - measured.direct.p50) * 1000) / 1000,
      pairedOverheadP50Ms: measured.pairedOverheadP50Ms,
    };
  }
  // What any authenticated list call costs over its query, geoquery or not: HTTP, token and user lookup, request validation, JSON.
  const noGeo = sql`SELECT id, doc FROM devices WHERE ${readableBy(principal, 'devices.id')} AND category = ${'none'}
    ORDER BY lower(name) ASC NULLS LAST, id LIMIT ${PAGE} OFFSET 0`.compile(db);
  const pipeline = await measurePair(
    async () => {
      const res = await fetch(`http://127.0.0.1:${httpPort}/api/iotnodes?filter[category]=none`, { headers: { authorization: `Bearer ${token}` } });
      if (res.status !== 200) throw new Error(`list answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as unknown[]).length;
    },
    async () => (await client.query(noGeo.sql, noGeo.parameters as unknown[])).rowCount ?? 0,
  );
  result.listWithoutGeoquery = {
    api: pipeline.api,
    direct: pipeline.direct,
    apiOverheadP50Ms: Math.round((pipeline.api.p50 - pipeline.direct.p50) * 1000) / 1000,
    pairedOverheadP50Ms: pipeline.pairedOverheadP50Ms,
  };
  const small = result.small as { apiOverheadP50Ms: number };
  result.loadAverage = (await import('node:os')).loadavg().map((x) => Math.round(x * 100) / 100);
  result.aim = { apiOverheadP50MsBelow: 2, met: small.apiOverheadP50Ms < 2 };
  result.usesGistIndex = Object.keys(fences).every((name) => (result[name] as { usesGistIndex: boolean }).usesGistIndex);
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} finally {
  await client.end();
  await db.destroy();
  await platform.stop();
  rmSync(dataDir, { recursive: true, force: true });
  await cluster.stop();
}
