/**
 * `npm run rebuild [-- <read model>…]`: builds read models again from the
 * event log, with the platform running (one process or a cluster) or stopped.
 *
 * 1. The named projections' tables are cloned, empty, into the schema
 *    `rebuild` (columns, defaults, identities, constraints with their names,
 *    unique indexes; other indexes come after the bulk of the replay).
 * 2. The event log is replayed into them from the start, in transactions whose
 *    `search_path` puts `rebuild` first, so each projection's own `apply`
 *    writes there unchanged, while the live runner keeps serving. The replay
 *    never passes the live runner's checkpoint.
 * 3. Once within a batch of it, one swap transaction closes the runner's gate
 *    (`closeSwapGate`: the batch under way finishes, the next waits), replays
 *    the shadow up to exactly the live checkpoint, locks the live tables (only
 *    now do readers wait), drops them and moves the shadow tables into their
 *    place, with the views over them (the `analytics` schema, or any other)
 *    recreated, grants and comments carried over. The runner then goes on from
 *    its checkpoint, on the new tables.
 *
 * Readers never see a half-built model, and nothing answers an error: a read
 * waits for the swap's few milliseconds; a write waits for the runner's pause.
 */
import { realpathSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Kysely, PostgresDialect, sql, type Transaction } from 'kysely';
import { pino, type Logger } from 'pino';
import { loadConfig } from '../api/config.js';
import { openDatabase, openPool } from '../api/platform.js';
import { migrateToLatest } from '../migrations/index.js';
import { createPostgresStore } from '../domain/eventstore/postgres.js';
import { createEsdbStore } from '../domain/eventstore/esdb.js';
import type { EventStore } from '../domain/eventstore/port.js';
import { versioned } from '../domain/eventstore/versioned.js';
import { loadCheckpoint } from '../domain/eventstore/subscriber.js';
import { comparePositions, type Position, type RecordedEvent } from '../domain/shared/events.js';
import { closeSwapGate, type Projection } from './runner.js';
import { allProjections } from './index.js';
import type { Database } from './database.js';

/** The schema the new read models are built in; emptied at the start and end of every rebuild. */
export const SHADOW = 'rebuild';
/** Held for a whole rebuild, so two never run at once. */
const REBUILD_LOCK = 'platform-rebuild';

export class UnknownReadModelError extends Error {
  constructor(
    readonly unknown: string[],
    readonly valid: string[],
  ) {
    super(`unknown read model${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}; the read models are: ${valid.join(', ')}`);
  }
}

export class RebuildBusyError extends Error {
  constructor() {
    super('another rebuild is running on this database; try again once it has finished');
  }
}

export interface RebuildOptions {
  /** Read-model names (a projection's name, or one of its tables); empty or absent: every read model. */
  names?: string[];
  /** The live runner's checkpoint: the position the new tables must reach. */
  runner?: string;
  batchSize?: number;
  /**
   * How long the swap waits for readers before it gives up the locks and tries
   * again; never more than half the server's `deadlock_timeout`, so that when a
   * reader's transaction holds one table and waits for another the swap holds,
   * the swap gives way, not the reader.
   */
  lockTimeoutMs?: number;
  /** The projections to choose from (every one by default). */
  projections?: Projection[];
}

export interface RebuildReport {
  projections: string[];
  tables: string[];
  /** Events replayed into the new tables. */
  events: number;
  /** The live checkpoint the new tables were swapped in at. */
  position: string | null;
  ms: number;
  /** How long the runner was held at its gate (the last catch-up and the swap). */
  pausedMs: number;
  /** How long readers of the rebuilt tables waited (the swap itself). */
  lockedMs: number;
  /** Swaps given up to readers: one held a table past the lock timeout, or waited for one the swap held. */
  retries: number;
  /** Events the projections refused in the replay (the live runner parks the same ones). */
  skipped: number;
}

/** The read-model names `npm run rebuild` takes: every projection's name. */
export const readModelNames = (projections: Projection[] = allProjections()): string[] => projections.map((p) => p.name).sort();

/**
 * The projections to rebuild for `names` (a projection's name or a table it
 * owns), with the owners of the tables they read; every projection for none.
 */
export function selectProjections(names: string[], projections: Projection[] = allProjections()): Projection[] {
  if (names.length === 0) return projections;
  const owner = new Map<string, Projection>();
  for (const p of projections) for (const t of p.tables) owner.set(t, p);
  const unknown = names.filter((n) => !projections.some((p) => p.name === n) && !owner.has(n));
  if (unknown.length) throw new UnknownReadModelError(unknown, readModelNames(projections));
  const chosen = new Set(names.map((n) => projections.find((p) => p.name === n) ?? owner.get(n)!));
  for (let grew = true; grew; ) {
    grew = false;
    for (const p of [...chosen]) {
      for (const t of p.reads ?? []) {
        const o = owner.get(t);
        if (o && !chosen.has(o)) (chosen.add(o), (grew = true));
      }
    }
  }
  return projections.filter((p) => chosen.has(p));
}

interface LiveTable {
  name: string;
  oid: number;
  /** Its schema, quoted as needed. */
  schema: string;
  /** `schema.table`, quoted as needed (as `pg_get_indexdef` writes it). */
  qualified: string;
}

/**
 * Builds the chosen read models again from the event log and swaps them in,
 * whether the platform runs or not. Resolves with what it did.
 */
export async function rebuild(store: EventStore, db: Kysely<Database>, log: Logger, options: RebuildOptions = {}): Promise<RebuildReport> {
  const started = Date.now();
  const all = options.projections ?? allProjections();
  let projections = selectProjections(options.names ?? [], all);
  const runner = options.runner ?? 'read-models';
  const batchSize = options.batchSize ?? 2000;

  return db.connection().execute(async (session) => {
    const { rows: locked } = await sql<{ ok: boolean }>`SELECT pg_try_advisory_lock(hashtextextended(${REBUILD_LOCK}, 0)) AS ok`.execute(session);
    if (!locked[0]?.ok) throw new RebuildBusyError();
    try {
      // Under the server's deadlock check: in a lock cycle with a reader, the swap's wait ends first and the reader's query goes on.
      const deadlock = (await sql<{ ms: number }>`SELECT setting::int AS ms FROM pg_settings WHERE name = 'deadlock_timeout'`.execute(session)).rows[0]!.ms;
      const lockTimeoutMs = Math.max(1, Math.round(Math.min(options.lockTimeoutMs ?? 2000, deadlock / 2)));
      projections = await withForeignKeyPartners(session, projections, all);
      const tables = projections.flatMap((p) => p.tables);
      const live = await liveTables(session, tables);
      const { rows: path } = await sql<{ p: string }>`SELECT current_setting('search_path') AS p`.execute(session);
      const shadowPath = `${SHADOW}, ${path[0]!.p}`;
      const deferred = await cloneTables(session, live, shadowPath);
      log.info({ projections: projections.map((p) => p.name), tables }, 'rebuild: replaying the event log into new tables');

      const shadow = new ShadowReplay(store, db, projections, shadowPath, batchSize, log);
      // Approach the live checkpoint while the runner serves; each pass is shorter than the one before.
      for (;;) {
        const applied = await shadow.replayTo(await loadCheckpoint(db, runner));
        if (applied <= batchSize) break;
      }
      for (const ddl of deferred) await sql.raw(ddl).execute(session);
      for (const t of live) await sql.raw(`ANALYZE ${SHADOW}.${quoteIdent(t.name)}`).execute(session);

      let retries = 0;
      for (;;) {
        await shadow.replayTo(await loadCheckpoint(db, runner));
        try {
          const swap = await swapIn(session, db, live, shadow, runner, lockTimeoutMs);
          const report: RebuildReport = {
            projections: projections.map((p) => p.name),
            tables,
            events: shadow.events,
            position: swap.position ? `${swap.position.commit}/${swap.position.prepare}` : null,
            ms: Date.now() - started,
            pausedMs: swap.pausedMs,
            lockedMs: swap.lockedMs,
            retries,
            skipped: shadow.skipped,
          };
          log.info(report, 'read models rebuilt');
          return report;
        } catch (error) {
          // Either way the swap's transaction rolled back whole: the live tables are untouched, the shadow still there.
          if (!GAVE_WAY.has((error as { code?: string }).code ?? '') || ++retries > 20) throw error;
          log.warn({ retries }, 'rebuild: the swap gave way to a reader of a read model; swapping again shortly');
          await new Promise((r) => setTimeout(r, 200 * retries));
        }
      }
    } finally {
      await sql.raw(`DROP SCHEMA IF EXISTS ${SHADOW} CASCADE`).execute(session).catch((err) => log.error({ err }, 'rebuild: could not drop the shadow schema'));
      await sql`SELECT pg_advisory_unlock(hashtextextended(${REBUILD_LOCK}, 0))`.execute(session).catch(() => undefined);
    }
  });
}

/** The swap gave way to readers: its lock timeout (55P03), or a deadlock with one of them (40P01) that PostgreSQL broke on the swap's side. */
const GAVE_WAY = new Set(['55P03', '40P01']);

/** Adds the projections whose tables have foreign keys to or from the chosen ones: such tables move together. */
async function withForeignKeyPartners(db: Kysely<any>, chosen: Projection[], all: Projection[]): Promise<Projection[]> {
  const { rows } = await sql<{ from: string; to: string }>`
    SELECT c.conrelid::regclass::text AS "from", c.confrelid::regclass::text AS "to"
    FROM pg_constraint c WHERE c.contype = 'f'`.execute(db);
  const owner = new Map<string, Projection>();
  for (const p of all) for (const t of p.tables) owner.set(t, p);
  const set = new Set(chosen);
  for (let grew = true; grew; ) {
    grew = false;
    for (const { from, to } of rows) {
      const [a, b] = [owner.get(unqualified(from)), owner.get(unqualified(to))];
      for (const [x, y] of [[a, b], [b, a]] as const) {
        if (x && set.has(x) && y && !set.has(y)) (set.add(y), (grew = true));
      }
      // A table outside the read models that references one would keep pointing at the table dropped by the swap.
      if (b && set.has(b) && !a) throw new Error(`${from} references the read model ${to} by a foreign key; a rebuild cannot replace ${to} under it`);
    }
  }
  return all.filter((p) => set.has(p));
}

const unqualified = (name: string) => name.replace(/^.*\./, '').replace(/"/g, '');
const quoteIdent = (name: string) => `"${name.replace(/"/g, '""')}"`;
const quoteLiteral = (text: string) => `'${text.replace(/'/g, "''")}'`;

async function liveTables(db: Kysely<any>, names: string[]): Promise<LiveTable[]> {
  const out: LiveTable[] = [];
  for (const name of names) {
    const { rows } = await sql<{ oid: number; schema: string; qualified: string; kind: string; rls: boolean; triggers: number }>`
      SELECT c.oid::int AS oid, quote_ident(n.nspname) AS schema, quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS qualified, c.relkind AS kind, c.relrowsecurity AS rls,
        (SELECT count(*)::int FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal) AS triggers
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass(${quoteIdent(name)})`.execute(db);
    const row = rows[0];
    if (!row) throw new Error(`the read-model table ${name} does not exist; run the migrations first`);
    if (row.kind !== 'r') throw new Error(`the read model ${name} is not a plain table`);
    if (row.triggers > 0 || row.rls) throw new Error(`the read model ${name} has triggers or row security, which a rebuild does not carry over`);
    out.push({ name, oid: row.oid, schema: row.schema, qualified: row.qualified });
  }
  return out;
}

/**
 * Creates the shadow schema with an empty copy of every table: columns,
 * defaults, identities (their own sequences), serial columns' sequences,
 * constraints under their names, unique indexes. Returns the other indexes'
 * DDL, to run once the bulk of the replay is in.
 */
async function cloneTables(db: Kysely<any>, live: LiveTable[], shadowPath: string): Promise<string[]> {
  const deferred: string[] = [];
  await db.transaction().execute(async (tx) => {
    await sql.raw(`DROP SCHEMA IF EXISTS ${SHADOW} CASCADE`).execute(tx);
    await sql.raw(`CREATE SCHEMA ${SHADOW}`).execute(tx);
    const constraints: string[] = [];
    const indexes: string[] = [];
    for (const t of live) {
      const target = `${SHADOW}.${quoteIdent(t.name)}`;
      await sql.raw(`CREATE TABLE ${target} (LIKE ${t.qualified} INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING GENERATED INCLUDING STORAGE INCLUDING COMPRESSION INCLUDING COMMENTS INCLUDING STATISTICS)`).execute(tx);
      // A serial column's default names the live table's sequence: give the copy a sequence of its own.
      const { rows: serials } = await sql<{ column: string; seq: string }>`
        SELECT a.attname AS column, s.relname AS seq FROM pg_depend d
        JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
        JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
        WHERE d.refobjid = ${t.oid} AND d.classid = 'pg_class'::regclass AND d.deptype = 'a'`.execute(tx);
      for (const s of serials) {
        const seq = `${SHADOW}.${quoteIdent(s.seq)}`;
        await sql.raw(`CREATE SEQUENCE ${seq} OWNED BY ${target}.${quoteIdent(s.column)}`).execute(tx);
        await sql.raw(`ALTER TABLE ${target} ALTER COLUMN ${quoteIdent(s.column)} SET DEFAULT nextval(${quoteLiteral(seq)}::regclass)`).execute(tx);
      }
      const { rows: cons } = await sql<{ name: string; def: string; type: string }>`
        SELECT conname AS name, pg_get_constraintdef(oid) AS def, contype AS type FROM pg_constraint
        WHERE conrelid = ${t.oid} AND contype IN ('p', 'u', 'c', 'x', 'f') ORDER BY contype = 'f', conname`.execute(tx);
      for (const c of cons) (c.type === 'f' ? constraints : indexes).push(`ALTER TABLE ${target} ADD CONSTRAINT ${quoteIdent(c.name)} ${c.def}`);
      const { rows: idx } = await sql<{ def: string; unique: boolean }>`
        SELECT pg_get_indexdef(i.indexrelid) AS def, i.indisunique AS unique FROM pg_index i
        WHERE i.indrelid = ${t.oid}
          AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conrelid = i.indrelid AND c.conindid = i.indexrelid AND c.contype IN ('p', 'u', 'x'))
        ORDER BY i.indexrelid`.execute(tx);
      for (const i of idx) {
        const def = i.def.replace(` ON ${t.qualified} USING `, ` ON ${target} USING `).replace(` ON ONLY ${t.qualified} USING `, ` ON ONLY ${target} USING `);
        if (def === i.def) throw new Error(`cannot copy an index of ${t.name}: ${i.def}`);
        // Unique ones serve ON CONFLICT during the replay; the others are built faster once the rows are in.
        (i.unique ? indexes : deferred).push(def);
      }
    }
    // Foreign keys after every table has its keys; unqualified names find the shadow tables first.
    await sql.raw(`SET LOCAL search_path TO ${shadowPath}`).execute(tx);
    for (const ddl of [...indexes, ...constraints]) await sql.raw(ddl).execute(tx);
  });
  return deferred;
}

/** Replays the event log into the shadow tables, up to a position it never passes. */
class ShadowReplay {
  at: Position | null = null;
  events = 0;
  skipped = 0;

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly projections: Projection[],
    private readonly shadowPath: string,
    private readonly batchSize: number,
    private readonly log: Logger,
  ) {}

  /** Applies every event after the shadow's position up to `target`; returns how many. */
  async replayTo(target: Position | null): Promise<number> {
    if (!target || (this.at && comparePositions(this.at, target) >= 0)) return 0;
    let applied = 0;
    const read = (after: Position | null) => this.store.readAll({ after, limit: this.batchSize });
    let next = read(this.at);
    for (;;) {
      const batch = (await next).filter((e) => comparePositions(e.position, target) <= 0);
      if (batch.length === 0) return applied;
      const last = batch[batch.length - 1]!.position;
      // The next page is read while this one is applied.
      next = comparePositions(last, target) < 0 ? read(last) : Promise.resolve([]);
      await this.apply(batch);
      this.at = last;
      applied += batch.length;
      this.events += batch.length;
    }
  }

  private async apply(batch: RecordedEvent[]): Promise<void> {
    try {
      await this.applyNow(batch);
    } catch {
      // As the live runner does: find the event no projection can apply, set it aside, go on.
      for (const event of batch) {
        try {
          await this.applyNow([event]);
        } catch (again) {
          await sql`SELECT 1`.execute(this.db); // the database is down: give up, nothing was swapped
          this.skipped++;
          this.log.error({ err: again, eventId: event.id, streamId: event.streamId, type: event.type }, 'rebuild: an event could not be applied; skipped, as the live runner parks it');
        }
      }
    }
  }

  private async applyNow(batch: RecordedEvent[]): Promise<void> {
    await this.db.transaction().execute(async (tx) => {
      // A crash loses the shadow, never the live models: the replay need not wait for the disk.
      await sql.raw(`SET LOCAL search_path TO ${this.shadowPath}; SET LOCAL synchronous_commit TO off`).execute(tx);
      for (const projection of this.projections) await projection.apply(tx, batch);
    });
  }
}

interface ViewDef {
  oid: number;
  qualified: string;
  def: string;
  options: string[] | null;
  owner: string;
  comment: string | null;
  columns: { name: string; comment: string }[];
  grants: string[];
}

/**
 * The swap, in one transaction on the rebuild's own connection: the runner's
 * gate closed, the shadow at exactly the live checkpoint, the live tables
 * locked and replaced, the views over them recreated.
 */
async function swapIn(session: Kysely<any>, db: Kysely<Database>, live: LiveTable[], shadow: ShadowReplay, runner: string, lockTimeoutMs: number): Promise<{ position: Position | null; pausedMs: number; lockedMs: number }> {
  let paused = 0;
  let lockedAt = 0;
  let position: Position | null = null;
  await session.transaction().execute(async (tx) => {
    await closeSwapGate(tx);
    paused = Date.now();
    // The runner is between two batches now: its checkpoint is exactly what the live tables hold.
    position = await loadCheckpoint(tx, runner);
    await shadow.replayTo(position);
    if (position && (!shadow.at || comparePositions(shadow.at, position) !== 0)) throw new Error('the new read models did not reach the live checkpoint');

    // Read before the lock, so readers wait less; a view made in between makes the DROP fail, and the rebuild with it, harmlessly.
    const views = await dependentViews(tx, live);
    const carried = await tableExtras(tx, live);
    await sql.raw(`SET LOCAL lock_timeout = ${lockTimeoutMs}`).execute(tx);
    await sql.raw(`LOCK TABLE ${live.map((t) => t.qualified).join(', ')} IN ACCESS EXCLUSIVE MODE`).execute(tx);
    lockedAt = Date.now();
    await sql`SET LOCAL lock_timeout = 0`.execute(tx);
    await sameShape(tx, live);
    // One round trip for the whole exchange: readers wait for this transaction only.
    await sql.raw([
      ...[...views].reverse().map((v) => `DROP VIEW ${v.qualified}`),
      `DROP TABLE ${live.map((t) => t.qualified).join(', ')}`,
      ...live.map((t) => `ALTER TABLE ${SHADOW}.${quoteIdent(t.name)} SET SCHEMA ${t.schema}`),
      ...carried,
    ].join(';\n')).execute(tx);
    const recreate = views.flatMap((v) => [
      `CREATE VIEW ${v.qualified}${v.options?.length ? ` WITH (${v.options.join(', ')})` : ''} AS ${v.def}`,
      `ALTER VIEW ${v.qualified} OWNER TO ${quoteIdent(v.owner)}`,
      ...(v.comment !== null ? [`COMMENT ON VIEW ${v.qualified} IS ${quoteLiteral(v.comment)}`] : []),
      ...v.columns.map((c) => `COMMENT ON COLUMN ${v.qualified}.${quoteIdent(c.name)} IS ${quoteLiteral(c.comment)}`),
      ...v.grants,
    ]);
    if (recreate.length) await sql.raw(recreate.join(';\n')).execute(tx);
  });
  const done = Date.now();
  return { position, pausedMs: done - paused, lockedMs: done - lockedAt };
}

/** A migration that ran meanwhile (a new column, a renamed index) would be undone by the swap: refuse, and let the rebuild start again. */
async function sameShape(tx: Transaction<any>, live: LiveTable[]): Promise<void> {
  const { rows } = await sql<{ name: string; live: string; shadow: string }>`
    WITH shape AS (
      SELECT c.relname AS name, n.nspname = ${SHADOW} AS shadow,
        (SELECT coalesce(string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum), '')
           FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
        || ' | ' || (SELECT coalesce(string_agg(i.relname, ', ' ORDER BY i.relname), '') FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indrelid = c.oid) AS s
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE c.oid = ANY(${live.map((t) => t.oid)}::oid[]) OR (n.nspname = ${SHADOW} AND c.relname = ANY(${live.map((t) => t.name)}::text[]) AND c.relkind = 'r')
    )
    SELECT l.name, l.s AS live, s.s AS shadow FROM shape l JOIN shape s ON s.name = l.name AND s.shadow WHERE NOT l.shadow`.execute(tx);
  for (const t of live) {
    const row = rows.find((r) => r.name === t.name);
    if (!row || row.live !== row.shadow) throw new Error(`the read model ${t.name} changed shape during the rebuild (a migration ran?); run the rebuild again`);
  }
}

/** Grants, owner and comment of each live table, as DDL for its replacement. */
async function tableExtras(tx: Transaction<any>, live: LiveTable[]): Promise<string[]> {
  const { rows } = await sql<{ oid: number; owner: string; comment: string | null; grantee: string | null; privilege: string | null; grantable: boolean | null }>`
    SELECT c.oid::int AS oid, pg_get_userbyid(c.relowner) AS owner, obj_description(c.oid, 'pg_class') AS comment,
      CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END AS grantee, a.privilege_type AS privilege, a.is_grantable AS grantable
    FROM pg_class c LEFT JOIN LATERAL aclexplode(c.relacl) a ON a.grantee <> c.relowner
    WHERE c.oid = ANY(${live.map((t) => t.oid)}::oid[])`.execute(tx);
  const out: string[] = [];
  for (const t of live) {
    const mine = rows.filter((r) => r.oid === t.oid);
    out.push(`ALTER TABLE ${t.qualified} OWNER TO ${quoteIdent(mine[0]!.owner)}`);
    if (mine[0]!.comment !== null) out.push(`COMMENT ON TABLE ${t.qualified} IS ${quoteLiteral(mine[0]!.comment)}`);
    for (const r of mine) if (r.privilege) out.push(grant(r.privilege, t.qualified, r.grantee, r.grantable!));
  }
  return out;
}

const grant = (privilege: string, qualified: string, grantee: string | null, grantable: boolean) =>
  `GRANT ${privilege} ON TABLE ${qualified} TO ${grantee === null ? 'PUBLIC' : quoteIdent(grantee)}${grantable ? ' WITH GRANT OPTION' : ''}`;

async function grantsOf(tx: Transaction<any>, oid: number, qualified: string): Promise<string[]> {
  const { rows } = await sql<{ grantee: string | null; privilege: string; grantable: boolean }>`
    SELECT CASE WHEN a.grantee = 0 THEN NULL ELSE pg_get_userbyid(a.grantee) END AS grantee, a.privilege_type AS privilege, a.is_grantable AS grantable
    FROM pg_class c, aclexplode(c.relacl) a WHERE c.oid = ${oid} AND a.grantee <> c.relowner`.execute(tx);
  return rows.map((r) => grant(r.privilege, qualified, r.grantee, r.grantable));
}

/** Every view over the tables, directly or through other views, in an order they can be created in. */
async function dependentViews(tx: Transaction<any>, live: LiveTable[]): Promise<ViewDef[]> {
  const oids = live.map((t) => t.oid);
  const { rows: edges } = await sql<{ view: number; on: number; kind: string }>`
    WITH RECURSIVE deps(view, on_oid) AS (
      SELECT DISTINCT r.ev_class, d.refobjid FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
      WHERE d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass AND d.refobjid = ANY(${oids}::oid[]) AND r.ev_class <> d.refobjid
      UNION
      SELECT DISTINCT r.ev_class, d.refobjid FROM deps JOIN pg_depend d ON d.refobjid = deps.view AND d.classid = 'pg_rewrite'::regclass AND d.refclassid = 'pg_class'::regclass
        JOIN pg_rewrite r ON r.oid = d.objid AND r.ev_class <> d.refobjid
    )
    SELECT deps.view::int AS view, deps.on_oid::int AS on, c.relkind AS kind FROM deps JOIN pg_class c ON c.oid = deps.view`.execute(tx);
  if (edges.length === 0) return [];
  const matview = edges.find((e) => e.kind !== 'v');
  if (matview) throw new Error(`a materialized view (oid ${matview.view}) reads a rebuilt read model; drop it before the rebuild and create it again after`);
  const views = [...new Set(edges.map((e) => e.view))];
  // Topological order: a view after the views it reads.
  const ordered: number[] = [];
  const visit = (v: number, path: Set<number>) => {
    if (ordered.includes(v) || path.has(v)) return;
    path.add(v);
    for (const e of edges) if (e.view === v && views.includes(e.on)) visit(e.on, path);
    ordered.push(v);
  };
  for (const v of views) visit(v, new Set());
  // Captured fully qualified, so they mean the same whatever the search_path.
  await sql`SET LOCAL search_path TO pg_catalog`.execute(tx);
  const out: ViewDef[] = [];
  for (const oid of ordered) {
    const { rows } = await sql<{ qualified: string; def: string; options: string[] | null; owner: string; comment: string | null }>`
      SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname) AS qualified, pg_get_viewdef(c.oid) AS def, c.reloptions AS options,
        pg_get_userbyid(c.relowner) AS owner, obj_description(c.oid, 'pg_class') AS comment
      FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = ${oid}`.execute(tx);
    const { rows: columns } = await sql<{ name: string; comment: string }>`
      SELECT attname AS name, col_description(attrelid, attnum) AS comment FROM pg_attribute
      WHERE attrelid = ${oid} AND attnum > 0 AND col_description(attrelid, attnum) IS NOT NULL`.execute(tx);
    const row = rows[0]!;
    out.push({ oid, ...row, def: row.def.trim().replace(/;$/, ''), columns, grants: await grantsOf(tx, oid, row.qualified) });
  }
  await sql`SET LOCAL search_path TO DEFAULT`.execute(tx);
  return out;
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
  const names = process.argv.slice(2).filter((a) => a !== '--');
  try {
    selectProjections(names);
  } catch (error) {
    if (!(error instanceof UnknownReadModelError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
  const config = loadConfig();
  const log = pino({ level: config.logLevel });
  const database = openDatabase(config, log);
  const pool = openPool(database.url, 4, log, 'platform rebuild');
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const store = versioned(config.eventstoreUrl ? createEsdbStore(config.eventstoreUrl) : createPostgresStore(pool));
  let code = 0;
  try {
    await migrateToLatest(db);
    await rebuild(store, db, log, { names });
  } catch (error) {
    log.error({ err: error }, 'rebuild failed; the live read models are as they were');
    code = 1;
  }
  await store.close();
  await db.destroy();
  // Leave a cluster that a running platform uses alone.
  if (database.cluster && !database.cluster.wasRunning) database.cluster.stop();
  process.exit(code);
}
