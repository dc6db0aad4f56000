import { sql, type Transaction } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { CalculationDefinition, CalculationEvent } from '../domain/calculations/calculation.js';
import type { DeviceEvent } from '../domain/devices/device.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';
import { jsonbArray } from '../domain/shared/jsonb.js';
import { calculationActor } from '../domain/calculations/calculation.js';

export interface CalculationsTable {
  id: string;
  name: string;
  type: string;
  definition: CalculationDefinition;
  /** `onChange` or `interval`, for the reactor's interval query. */
  schedule: string;
  created_by: string;
  revision: number;
  created_at: Date;
  /** When the definition was last set: created or replaced. */
  updated_at: Date;
  /** Why the calculation does not run, or null when it does. */
  halted: string | null;
  halted_at: Date | null;
  last_value: unknown;
  last_reported_at: Date | null;
  /** The global position of the last result's event: a result applied again, or an older one, never replaces a newer one. */
  last_commit: string | null;
  last_prepare: string | null;
  /** Kept after deletion, so the reactor can tell which calculations were live at its checkpoint. */
  deleted_at: Date | null;
}

export interface CalculationsTables {
  calculations: CalculationsTable;
}

const EVENTS = new Set(['CalculationCreated', 'CalculationReplaced', 'CalculationHalted', 'CalculationResumed', 'CalculationDeleted']);
const RESULT = /^calculation:([0-9a-f]{24})$/;

/**
 * Calculations, guarded by stream revision, and the last result of each,
 * taken from the results themselves (the `DeviceReported` events a
 * calculation writes, with `topic` `calculation:<id>`) and guarded by their
 * global position.
 */
export const calculationsProjection: Projection = {
  name: 'calculations',
  tables: ['calculations'],
  async apply(tx, batch) {
    // Of the results in a batch, only each calculation's last (in global order) can be its last result.
    const results = new Map<string, RecordedEvent & DeviceEvent & { type: 'DeviceReported' }>();
    for (const event of batch) {
      if (EVENTS.has(event.type)) await applyEvent(tx, event as RecordedEvent & CalculationEvent);
      else if (event.type === 'DeviceReported') {
        const match = RESULT.exec((event.data as { topic?: string }).topic ?? '');
        // Written by the calculation itself: a report from elsewhere (an external broker's topic may be any text) is none of its results.
        if (match && event.metadata.actor === calculationActor(match[1]!)) results.set(match[1]!, event as RecordedEvent & DeviceEvent & { type: 'DeviceReported' });
      }
    }
    await applyResults(tx, results);
  },
};

async function applyEvent(tx: Transaction<Database>, event: RecordedEvent & CalculationEvent): Promise<void> {
  const { id, at } = event.data;
  const guard = sql`id = ${id} AND revision < ${event.revision}`;
  switch (event.type) {
    case 'CalculationCreated': {
      const d = event.data.definition;
      await sql`INSERT INTO calculations (id, name, type, definition, schedule, created_by, revision, created_at, updated_at)
        VALUES (${id}, ${d.name}, ${d.type}, ${JSON.stringify(d)}::jsonb, ${d.schedule.type}, ${event.data.createdBy}, ${event.revision}, ${at}, ${at})
        ON CONFLICT (id) DO NOTHING`.execute(tx);
      return;
    }
    case 'CalculationReplaced': {
      const d = event.data.definition;
      await sql`UPDATE calculations SET name = ${d.name}, type = ${d.type}, definition = ${JSON.stringify(d)}::jsonb, schedule = ${d.schedule.type},
        updated_at = ${at}, revision = ${event.revision} WHERE ${guard}`.execute(tx);
      return;
    }
    case 'CalculationHalted':
      await sql`UPDATE calculations SET halted = ${event.data.reason}, halted_at = ${at}, revision = ${event.revision} WHERE ${guard}`.execute(tx);
      return;
    case 'CalculationResumed':
      await sql`UPDATE calculations SET halted = NULL, halted_at = NULL, revision = ${event.revision} WHERE ${guard}`.execute(tx);
      return;
    case 'CalculationDeleted':
      await sql`UPDATE calculations SET deleted_at = ${at}, revision = ${event.revision} WHERE ${guard}`.execute(tx);
      return;
    default: {
      const _: never = event;
      return _;
    }
  }
}

/** Each calculation's last result of the batch, in one statement: a result never replaces one later in the log. */
async function applyResults(tx: Transaction<Database>, results: Map<string, RecordedEvent & DeviceEvent & { type: 'DeviceReported' }>): Promise<void> {
  const rows = [];
  for (const [id, event] of results) {
    // A result carries one field: the destination's.
    const value = Object.values(event.data.payload)[0];
    if (value === undefined) continue;
    rows.push({ id, v: value, t: event.data.reportedAt, c: String(event.position.commit), p: String(event.position.prepare) });
  }
  if (rows.length === 0) return;
  await sql`UPDATE calculations c SET last_value = r.v, last_reported_at = r.t::timestamptz, last_commit = r.c::numeric, last_prepare = r.p::numeric
    FROM jsonb_to_recordset(${jsonbArray(rows)}::jsonb) AS r(id text, v jsonb, t text, c text, p text)
    WHERE c.id = r.id AND (c.last_commit IS NULL OR (c.last_commit, c.last_prepare) < (r.c::numeric, r.p::numeric))`.execute(tx);
}
