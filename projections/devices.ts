import { sql, type Kysely, type Transaction } from 'kysely';
import type { Position, RecordedEvent } from '../domain/shared/events.js';
import { evolveDoc, reported, type DeviceDoc, type DeviceEvent, type DeviceState } from '../domain/devices/device.js';
import type { Database } from './database.js';
import { cutText } from '../domain/shared/json.js';
import { jsonbArray } from '../domain/shared/jsonb.js';
import type { Projection } from './runner.js';
import { RecentMemory } from '../domain/shared/recentMemory.js';

export interface DevicesTable {
  id: string;
  /** The whole device as clients see it, without `_id`. */
  doc: DeviceDoc;
  name: string;
  category: string | null;
  secret: string | null;
  credentials_set_id: string | null;
  /** `doc.lnglat` as a PostGIS point (SRID 4326), for geographic queries. */
  lnglat: unknown;
  created_by: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
  reported_at: Date | null;
}

/**
 * One row per report: `fields` maps the dotted path of each scalar value the
 * report brought (`devices.3.temperature`) to the value as reported. Readers
 * take one field's series through the SQL function `device_series(device,
 * field)` (migrations/0053_history_per_report.ts).
 */
export interface DeviceHistoryTable {
  device_id: string;
  time: Date;
  fields: Record<string, number | boolean | string>;
}

/** A device's document as it was after the event at `revision` of its stream, stamped `time`: where time travel starts folding. */
export interface DeviceSnapshotsTable {
  device_id: string;
  revision: number;
  /** The event's `metadata.time`. */
  time: string;
  doc: DeviceDoc;
}

/** A snapshot is kept every this many events of a device's stream. */
export const SNAPSHOT_EVERY = 500;

/**
 * A report the device's document left out (`reported`: past `DOC_LIMITS`), at most one a minute per device by
 * the reports' times; the logs projection logs each row of its batch on the device.
 */
export interface DeviceRefusalsTable {
  event_id: string;
  device_id: string;
  topic: string;
  limit_passed: 'fields' | 'bytes';
  time: Date;
  commit_position: string;
  prepare_position: string;
}

export interface DevicesTables {
  device_refusals: DeviceRefusalsTable;
  device_snapshots: DeviceSnapshotsTable;
  devices: DevicesTable;
  device_history: DeviceHistoryTable;
  device_history_fields: { device_id: string; field: string };
}

/**
 * A device's decider state as of its read-model row: an update or a deletion
 * then reads only the events after it, not every report of the device's life
 * (a device reporting every minute has half a million events a year). Claims
 * decide on who claimed before, which the row does not hold, so they fold the
 * whole stream; this state is for `UpdateDevice` and `DeleteDevice` only.
 */
export async function deviceAsRead(db: Kysely<Database>, id: string): Promise<{ state: DeviceState; revision: number } | null> {
  const row = await db.selectFrom('devices').select(['revision', 'doc', 'created_by', 'credentials_set_id']).where('id', '=', id).executeTakeFirst();
  if (!row) return null;
  return { state: { status: 'active', id, doc: row.doc, createdBy: row.created_by, credentialsSetId: row.credentials_set_id, claimedBy: [] }, revision: Number(row.revision) };
}

const DEVICE_EVENTS = new Set(['DeviceRegistered', 'DeviceUpdated', 'DeviceReported', 'DeviceClaimed', 'DeviceDeleted']);

/** Nested values are kept as history down to this depth, and at most this many values per report. */
const MAX_DEPTH = 6;
const MAX_VALUES = 200;
/** Longer strings are kept cut to this many characters. */
const MAX_STRING = 1024;
/**
 * A value whose dotted path is longer than this (in UTF-8 bytes) keeps no history: the path is a key of
 * `device_history_fields`, and PostgreSQL refuses a B-tree key of more than about 2,700 bytes. Six levels of
 * 256-character names could reach 6 KB; a report's document keeps such a value all the same.
 */
const MAX_PATH_BYTES = 1024;

interface Row {
  doc: DeviceDoc;
  revision: number;
  createdBy: string;
  credentialsSetId: string | null;
  isNew: boolean;
  changed: boolean;
  deleted: boolean;
}

/** History rows of a batch, one per report (see `historyRows`), as one array per column. */
interface HistoryRows {
  device: string[];
  time: string[];
  /** Each report's values as a JSON object text. */
  fields: string[];
  /** The device and path of every value, to list the fields that have history. */
  paths: [string, string][];
}

/** Scalar leaves of a report, as history values named by their dotted path. */
export function historyValues(path: string[], payload: unknown, out: [string, number | boolean | string][] = [], depth = 0): [string, number | boolean | string][] {
  if (out.length >= MAX_VALUES) return out;
  if (typeof payload === 'number') {
    if (Number.isFinite(payload) && path.length) keep(out, path.join('.'), payload);
  } else if (typeof payload === 'boolean' || typeof payload === 'string') {
    if (path.length) keep(out, path.join('.'), typeof payload === 'string' ? cutText(payload, MAX_STRING) : payload);
  } else if (payload && typeof payload === 'object' && !Array.isArray(payload) && depth < MAX_DEPTH) {
    for (const [k, v] of Object.entries(payload)) historyValues([...path, k], v, out, depth + 1);
  }
  return out;
}

const keep = (out: [string, number | boolean | string][], field: string, value: number | boolean | string) => {
  // Characters are at most 4 bytes: only a long path is measured.
  if (field.length * 4 <= MAX_PATH_BYTES || Buffer.byteLength(field) <= MAX_PATH_BYTES) out.push([field, value]);
};

/**
 * A report's history values as JSON object texts: one, unless the report
 * brings a path twice (`{"a.b": 1, "a": {"b": 2}}`); each reading is kept,
 * the second in a row of its own with the same time, as a series holds two
 * readings at one time.
 */
export function historyRows(values: [string, number | boolean | string][]): string[] {
  // Row k holds the k-th reading of each path: one row, unless a path came twice.
  const rows: [string, number | boolean | string][][] = [];
  const paths: Set<string>[] = [];
  for (const entry of values) {
    let k = 0;
    while (paths[k]?.has(entry[0])) k++;
    (paths[k] ??= new Set()).add(entry[0]);
    (rows[k] ??= []).push(entry);
  }
  return rows.map(fieldsJson);
}

/** History values as one JSON object; numbers are finite, so their text is valid JSON. */
function fieldsJson(values: [string, number | boolean | string][]): string {
  let text = '{';
  for (let i = 0; i < values.length; i++) {
    const [path, value] = values[i]!;
    text += (i ? ',' : '') + JSON.stringify(path) + ':' + (typeof value === 'string' ? JSON.stringify(value) : String(value));
  }
  return text + '}';
}

/** Documents and history fields of this many devices are remembered between batches. */
const REMEMBERED_DEVICES = 100_000;

/** What the projection remembers of a device between batches, as of a committed revision. */
interface Remembered {
  revision: number;
  doc: DeviceDoc;
  createdBy: string;
  credentialsSetId: string | null;
  /** The fields already in `device_history_fields`. */
  fields: Set<string>;
}

/** A report the document left out, as `device_refusals` keeps it. */
interface Refusal {
  eventId: string;
  deviceId: string;
  topic: string;
  limit: 'fields' | 'bytes';
  time: string;
  position: Position;
}

/** What a batch's events leave to write besides the device rows. */
interface Folded {
  history: HistoryRows;
  refusals: Refusal[];
  snapshots: { d: string; r: number; t: string; doc: DeviceDoc }[];
  deleted: Set<string>;
}

/** Events that a remembered document can take without reading its row: they neither create nor delete it. */
const FOLDED_ONTO_MEMORY = new Set(['DeviceReported', 'DeviceUpdated']);

/**
 * Folds events onto their devices' rows, in order, with the same `evolveDoc`
 * the write side uses. An event at or below its row's revision is applied
 * already and changes nothing.
 */
function fold(events: (RecordedEvent & DeviceEvent)[], rows: Map<string, Row>, out: Folded): void {
  for (const event of events) {
    const id = event.data.id;
    let row = rows.get(id);
    if (event.type === 'DeviceRegistered') {
      if (row) continue;
      row = {
        doc: evolveDoc({}, event),
        revision: event.revision,
        createdBy: event.data.createdBy,
        credentialsSetId: event.data.credentialsSetId ?? null,
        isNew: true,
        changed: true,
        deleted: false,
      };
      rows.set(id, row);
      out.deleted.delete(id);
      continue;
    }
    if (!row || row.deleted || event.revision <= row.revision) continue;
    row.revision = event.revision;
    if (event.type === 'DeviceDeleted') {
      row.deleted = true;
      out.deleted.add(id);
      continue;
    }
    // A report the document refuses (`reported`: past `DOC_LIMITS`) keeps no history either: the device never had those values.
    const report = event.type === 'DeviceReported' ? reported(row.doc, event.data) : null;
    row.doc = report ? report.doc : evolveDoc(row.doc, event);
    row.changed = true;
    if (event.revision % SNAPSHOT_EVERY === 0) out.snapshots.push({ d: id, r: event.revision, t: event.metadata.time, doc: row.doc });
    if (!report || event.type !== 'DeviceReported') continue;
    if (report.refused) {
      out.refusals.push({ eventId: event.id, deviceId: id, topic: event.data.topic, limit: report.refused, time: event.data.reportedAt, position: event.position });
    } else {
      const values = historyValues(event.data.path, event.data.payload);
      for (const fields of historyRows(values)) {
        out.history.device.push(id);
        out.history.time.push(event.data.reportedAt);
        out.history.fields.push(fields);
      }
      for (const [field] of values) out.history.paths.push([id, field]);
    }
  }
}

/** What is left of `out` once the devices `gone` are taken out of it. */
function without(out: Folded, gone: Set<string>): Folded {
  const keep = out.history.device.map((d) => !gone.has(d));
  return {
    history: {
      device: out.history.device.filter((_d, i) => keep[i]),
      time: out.history.time.filter((_t, i) => keep[i]),
      fields: out.history.fields.filter((_f, i) => keep[i]),
      paths: out.history.paths.filter(([d]) => !gone.has(d)),
    },
    refusals: out.refusals.filter((r) => !gone.has(r.deviceId)),
    snapshots: out.snapshots.filter((s) => !gone.has(s.d)),
    deleted: out.deleted,
  };
}

// Rows travel as one JSON parameter: cheaper to build and send than one array parameter per column.
const rowsParam = (list: [string, Row][], before?: Map<string, number>) =>
  jsonbArray(list.map(([id, r]) => ({ id, doc: r.doc, cs: r.credentialsSetId, created_by: r.createdBy, revision: r.revision, before: before?.get(id) ?? null })));

/**
 * Devices, their history and their snapshots. A batch is folded in memory per device with the
 * same `evolveDoc` the write side uses, then written with a handful of
 * multi-row statements, whatever the batch size: ingest bursts arrive here in
 * batches of up to a thousand reports.
 *
 * Each projection instance remembers, as of the last committed batch, the documents and the
 * history fields of recent devices. A device whose events in the batch are reports and updates
 * only is folded onto its remembered document and written with an update that holds only while
 * the row is still at the remembered revision; a row written elsewhere fails that check and
 * is read and folded from the table instead, as is every other device (`SELECT … FOR UPDATE`,
 * which leaves out the document when the row is at the remembered revision). So a remembered
 * document never stands in for a row written elsewhere, and in the usual batch of reports the
 * rows are written without being read. Remembered fields are not inserted again. What a batch
 * learns is kept only once its transaction commits.
 */
export function devicesProjection(): Projection {
  let memory = new RecentMemory<string, Remembered>(REMEMBERED_DEVICES);
  /** What the batch in flight learned, kept once it commits. */
  let learned = new Map<string, Remembered | null>();

  return {
    name: 'devices',
    tables: ['device_refusals', 'device_snapshots', 'device_history_fields', 'device_history', 'devices'],
    async apply(tx: Transaction<Database>, batch: RecordedEvent[]) {
      learned = new Map();
      const events = batch.filter((e) => DEVICE_EVENTS.has(e.type)) as (RecordedEvent & DeviceEvent)[];
      if (events.length === 0) return;
      const ids = [...new Set(events.map((e) => e.data.id))];
      const known = new Map(ids.map((id) => [id, memory.get(id)]));
      let out: Folded = { history: { device: [], time: [], fields: [], paths: [] }, refusals: [], snapshots: [], deleted: new Set() };

      // Remembered devices with only reports and updates in the batch: folded onto memory, written if the row is where memory left it.
      const quick = new Map<string, Row>();
      const unfoldable = new Set(events.filter((e) => !FOLDED_ONTO_MEMORY.has(e.type)).map((e) => e.data.id));
      for (const [id, k] of known) {
        if (k && !unfoldable.has(id)) quick.set(id, { doc: k.doc, revision: k.revision, createdBy: k.createdBy, credentialsSetId: k.credentialsSetId, isNew: false, changed: false, deleted: false });
      }
      if (quick.size) {
        fold(events.filter((e) => quick.has(e.data.id)), quick, out);
        const changed = [...quick.entries()].filter(([, r]) => r.changed);
        if (changed.length) {
          const before = new Map(changed.map(([id]) => [id, known.get(id)!.revision]));
          const written = await updateRows(tx, changed, before);
          if (written.size < changed.length) {
            const stale = new Set(changed.map(([id]) => id).filter((id) => !written.has(id)));
            for (const id of stale) quick.delete(id);
            out = without(out, stale);
          }
        }
      }

      const rows = new Map<string, Row>(quick);
      const rest = ids.filter((id) => !quick.has(id));
      if (rest.length) {
        const slow = new Map<string, Row>();
        const { rows: existing } = await sql<{ id: string; doc: DeviceDoc | null; revision: number | string; created_by: string; credentials_set_id: string | null }>`
          SELECT d.id, d.revision, d.created_by, d.credentials_set_id, CASE WHEN d.revision = k.revision THEN NULL ELSE d.doc END AS doc
          FROM devices d LEFT JOIN unnest(${rest}::text[], ${rest.map((id) => known.get(id)?.revision ?? null)}::bigint[]) AS k(id, revision) ON k.id = d.id
          WHERE d.id = ANY(${rest}::text[]) ORDER BY d.id FOR UPDATE OF d`.execute(tx);
        for (const r of existing) {
          const revision = Number(r.revision);
          const doc = r.doc ?? known.get(r.id)!.doc;
          slow.set(r.id, { doc, revision, createdBy: r.created_by, credentialsSetId: r.credentials_set_id, isNew: false, changed: false, deleted: false });
        }
        const restIds = new Set(rest);
        fold(events.filter((e) => restIds.has(e.data.id)), slow, out);
        const inserts = [...slow.entries()].filter(([, r]) => r.isNew && !r.deleted);
        const updates = [...slow.entries()].filter(([, r]) => !r.isNew && !r.deleted && r.changed);
        if (inserts.length) {
          await sql`INSERT INTO devices (id, doc, name, category, secret, credentials_set_id, lnglat, created_by, revision, created_at, updated_at, reported_at)
            SELECT u.id, u.doc, ${keyOf(sql.ref('u.doc'), 'name')}, ${keyOf(sql.ref('u.doc'), 'category')}, ${keyOf(sql.ref('u.doc'), 'secret')}, u.cs, ${lnglatOf(sql.ref('u.doc'))}, u.created_by, u.revision,
              (u.doc->>'createdAt')::timestamptz, (u.doc->>'updatedAt')::timestamptz, (u.doc->>'reportedAt')::timestamptz
            FROM jsonb_to_recordset(${rowsParam(inserts)}::jsonb) AS u(id text, doc jsonb, cs text, created_by text, revision bigint)
            ON CONFLICT (id) DO NOTHING`.execute(tx);
        }
        if (updates.length) await updateRows(tx, updates);
        for (const [id, row] of slow) rows.set(id, row);
      }

      for (const [id, row] of rows) {
        const k = known.get(id);
        if (row.deleted) learned.set(id, null);
        else if (row.isNew || row.changed || !k) {
          learned.set(id, { revision: row.revision, doc: row.doc, createdBy: row.createdBy, credentialsSetId: row.credentialsSetId, fields: new Set(k?.fields) });
        }
      }
      const { history, refusals, snapshots, deleted } = out;
      if (refusals.length) await recordRefusals(tx, refusals);
      if (history.device.length) {
        // One array per column: PostgreSQL reads arrays for about 2 µs a row less than the same rows as jsonb.
        await sql`INSERT INTO device_history (device_id, time, fields)
          SELECT * FROM unnest(${history.device}::text[], ${history.time}::timestamptz[], ${history.fields}::jsonb[])`.execute(tx);
        // Only the fields not yet known to be listed: after the first reports of a device, none.
        const fresh = new Map<string, Set<string>>();
        for (const [d, field] of history.paths) {
          if (learned.get(d)?.fields.has(field)) continue;
          let set = fresh.get(d);
          if (!set) fresh.set(d, (set = new Set()));
          set.add(field);
        }
        const fields = [...fresh].flatMap(([d, set]) => [...set].map((f) => [d, f]));
        if (fields.length) {
          await sql`INSERT INTO device_history_fields (device_id, field)
            SELECT x->>0, x->>1 FROM jsonb_array_elements(${JSON.stringify(fields)}::jsonb) AS x
            ON CONFLICT DO NOTHING`.execute(tx);
          for (const [d, f] of fields) learned.get(d)?.fields.add(f!);
        }
      }
      if (snapshots.length) {
        await sql`INSERT INTO device_snapshots (device_id, revision, time, doc)
          SELECT d, r, t, doc FROM jsonb_to_recordset(${jsonbArray(snapshots)}::jsonb) AS x(d text, r bigint, t text, doc jsonb)
          ON CONFLICT DO NOTHING`.execute(tx);
      }
      if (deleted.size) {
        const gone = [...deleted];
        await sql`DELETE FROM device_snapshots WHERE device_id = ANY(${gone}::text[])`.execute(tx);
        await sql`DELETE FROM device_refusals WHERE device_id = ANY(${gone}::text[])`.execute(tx);
        await sql`DELETE FROM device_history WHERE device_id = ANY(${gone}::text[])`.execute(tx);
        await sql`DELETE FROM device_history_fields WHERE device_id = ANY(${gone}::text[])`.execute(tx);
        await sql`DELETE FROM devices WHERE id = ANY(${gone}::text[])`.execute(tx);
      }
    },
    committed() {
      for (const [id, kept] of learned) {
        if (kept) memory.set(id, kept);
        else memory.delete(id);
      }
      learned = new Map();
    },
    emptied() {
      memory = new RecentMemory(REMEMBERED_DEVICES);
      learned = new Map();
    },
  };
}

/** A device that keeps reporting past its limits is logged once a minute, by the reports' times, not once per report. */
const REFUSAL_SPACING_MS = 60_000;

/**
 * Keeps the refusals to log: for each device, one unless another was kept
 * within a minute of it (in the table already, or earlier in the batch). A
 * batch applied again finds its own rows and adds nothing.
 */
async function recordRefusals(tx: Transaction<Database>, refusals: Refusal[]): Promise<void> {
  const devices = [...new Set(refusals.map((r) => r.deviceId))];
  const { rows } = await sql<{ device_id: string; last: Date }>`
    SELECT device_id, max(time) AS last FROM device_refusals WHERE device_id = ANY(${devices}::text[]) GROUP BY device_id`.execute(tx);
  const last = new Map(rows.map((r) => [r.device_id, new Date(r.last).getTime()]));
  const kept: Refusal[] = [];
  for (const r of refusals) {
    const time = Date.parse(r.time);
    const before = last.get(r.deviceId);
    if (before !== undefined && Math.abs(time - before) < REFUSAL_SPACING_MS) continue;
    last.set(r.deviceId, time);
    kept.push(r);
  }
  if (kept.length === 0) return;
  await sql`INSERT INTO device_refusals (event_id, device_id, topic, limit_passed, time, commit_position, prepare_position)
    SELECT * FROM unnest(${kept.map((r) => r.eventId)}::uuid[], ${kept.map((r) => r.deviceId)}::text[], ${kept.map((r) => r.topic)}::text[],
      ${kept.map((r) => r.limit)}::text[], ${kept.map((r) => r.time)}::timestamptz[], ${kept.map((r) => String(r.position.commit))}::bigint[],
      ${kept.map((r) => String(r.position.prepare))}::bigint[])
    ON CONFLICT (event_id) DO NOTHING`.execute(tx);
}

/** Writes folded rows; with `before`, only those still at the revision it gives for them. Answers the ids written. */
async function updateRows(tx: Transaction<Database>, list: [string, Row][], before?: Map<string, number>): Promise<Set<string>> {
  const { rows } = await sql<{ id: string }>`UPDATE devices d SET doc = u.doc, name = ${keyOf(sql.ref('u.doc'), 'name')}, category = ${keyOf(sql.ref('u.doc'), 'category')}, secret = ${keyOf(sql.ref('u.doc'), 'secret')},
      lnglat = ${lnglatOf(sql.ref('u.doc'))}, revision = u.revision,
      updated_at = (u.doc->>'updatedAt')::timestamptz, reported_at = (u.doc->>'reportedAt')::timestamptz
    FROM jsonb_to_recordset(${rowsParam(list, before)}::jsonb) AS u(id text, doc jsonb, revision bigint, before bigint)
    WHERE d.id = u.id AND (u.before IS NULL OR d.revision = u.before)
    RETURNING d.id`.execute(tx);
  return new Set(rows.map((r) => r.id));
}

/**
 * The PostGIS point of a device document's `lnglat`, or NULL: made from its coordinates alone, so members a report
 * may carry beside them (a GeoJSON `crs` naming an unknown reference system) never fail the batch.
 */
const lnglatOf = (doc: ReturnType<typeof sql.ref>) =>
  sql`CASE WHEN jsonb_typeof(${doc}->'lnglat'->'coordinates'->0) = 'number' AND jsonb_typeof(${doc}->'lnglat'->'coordinates'->1) = 'number'
    THEN ST_SetSRID(ST_MakePoint((${doc}->'lnglat'->'coordinates'->>0)::float8, (${doc}->'lnglat'->'coordinates'->>1)::float8), 4326) END`;

/**
 * A text field of the document for an indexed column, or NULL past 1024 bytes: a B-tree entry holds about 2,700 bytes,
 * and a report may bring any text (`category` is a report's field like another). The document keeps the value.
 */
const keyOf = (doc: ReturnType<typeof sql.ref>, field: string) =>
  sql`CASE WHEN octet_length(${doc}->>${field}) <= 1024 THEN ${doc}->>${field} END`;
