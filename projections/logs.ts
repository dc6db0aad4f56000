import { sql } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { LogEvent } from '../domain/logs/logEntry.js';
import type { DeviceEvent } from '../domain/devices/device.js';
import { calculationEntry } from '../domain/calculations/logs.js';
import type { CalculationEvent } from '../domain/calculations/calculation.js';
import type { Projection } from './runner.js';
import { runLogEntry } from '../domain/rules/run.js';
import { impliedEntries } from '../domain/logs/implied.js';
import { refusalEntry } from '../domain/devices/size.js';
import { storableText } from '../domain/shared/json.js';
import type { Transaction } from 'kysely';
import type { Database } from './database.js';

export interface DeviceLogsTable {
  id: string;
  resource_id: string;
  resource_type: string;
  type: string;
  priority: string;
  category: string;
  message: string;
  time: Date;
  expires_at: Date | null;
  data: Record<string, unknown> | null;
}

export interface LogsTables {
  device_logs: DeviceLogsTable;
}

/**
 * Entries that other events imply, each with its event's id as the entry's: a
 * claim is logged on its device, a rule's run on the rule, a calculation halted
 * or resumed on the calculation.
 */
function impliedEntry(e: RecordedEvent): LogEvent['data'] | null {
  if (e.type === 'CalculationHalted' || e.type === 'CalculationResumed') return calculationEntry(e as RecordedEvent & CalculationEvent);
  if (e.type !== 'DeviceClaimed') return runLogEntry(e);
  const claim = (e as RecordedEvent & DeviceEvent & { type: 'DeviceClaimed' }).data;
  return {
    id: e.id,
    resourceId: claim.id,
    resourceType: 'device',
    type: 'info',
    priority: 'medium',
    category: 'access',
    message: `Claimed by user ${claim.username ?? claim.userId} (${claim.userId})`,
    data: { userId: claim.userId, ...(claim.credentialsSetId ? { credentialsSetId: claim.credentialsSetId } : {}) },
    at: claim.at,
  };
}

/** Log entries, inserted in one statement per batch; the entry id keeps it idempotent. */
export const logsProjection: Projection = {
  name: 'logs',
  tables: ['device_logs'],
  // The devices projection, applied before this one in the same transaction, keeps there the reports a document left out.
  reads: ['device_refusals'],
  async apply(tx, batch) {
    const entries = batch
      .flatMap((e) => (e.type === 'LogEntryWritten' ? [(e as RecordedEvent & LogEvent).data] : [impliedEntry(e), ...impliedEntries(e)]))
      .filter((e): e is LogEvent['data'] => e !== null);
    if (batch.some((e) => e.type === 'DeviceReported')) entries.push(...(await refusalsOf(tx, batch)));
    if (entries.length === 0) return;
    await sql`INSERT INTO device_logs (id, resource_id, resource_type, type, priority, category, message, time, expires_at, data)
      SELECT id, resource_id, resource_type, type, priority, category, message, time, expires_at, data::jsonb
      FROM unnest(${entries.map((e) => e.id)}::uuid[], ${entries.map((e) => e.resourceId)}::text[], ${entries.map((e) => e.resourceType)}::text[],
        ${entries.map((e) => e.type)}::text[], ${entries.map((e) => e.priority)}::text[], ${entries.map((e) => e.category)}::text[],
        ${entries.map((e) => e.message)}::text[], ${entries.map((e) => e.at)}::timestamptz[], ${entries.map((e) => e.expiresAt ?? null)}::timestamptz[],
        ${entries.map((e) => (e.data ? JSON.stringify(e.data) : null))}::text[])
        AS x(id, resource_id, resource_type, type, priority, category, message, time, expires_at, data)
      WHERE expires_at IS NULL OR expires_at > now()
      ON CONFLICT (id) DO NOTHING`.execute(tx);
  },
};

/** The entries of the reports this batch's documents left out (`device_refusals`), found by their place in the log. */
async function refusalsOf(tx: Transaction<Database>, batch: RecordedEvent[]): Promise<LogEvent['data'][]> {
  const first = batch[0]!.position;
  const last = batch[batch.length - 1]!.position;
  const { rows } = await sql<{ event_id: string; device_id: string; topic: string; limit_passed: 'fields' | 'bytes'; time: Date }>`
    SELECT event_id, device_id, topic, limit_passed, time FROM device_refusals
    WHERE (commit_position, prepare_position) >= (${String(first.commit)}::bigint, ${String(first.prepare)}::bigint)
      AND (commit_position, prepare_position) <= (${String(last.commit)}::bigint, ${String(last.prepare)}::bigint)`.execute(tx);
  return rows.map((r) => refusalEntry({ eventId: r.event_id, deviceId: r.device_id, topic: storableText(r.topic), limit: r.limit_passed, time: new Date(r.time).toISOString() }));
}

/** Removes expired entries from the read model; the events stay in the store. */
export async function purgeExpiredLogs(db: import('kysely').Kysely<import('./database.js').Database>): Promise<number> {
  const result = await sql`DELETE FROM device_logs WHERE expires_at IS NOT NULL AND expires_at <= now()`.execute(db);
  return Number(result.numAffectedRows ?? 0);
}
