import { sql } from 'kysely';
import { resourceOfStream } from '../domain/audit/resources.js';
import type { Projection } from './runner.js';
import { jsonbArray } from '../domain/shared/jsonb.js';

export interface AuditStreamsTable {
  stream_id: string;
  /** As access rights name resource types: `device`, `dashboard`, … */
  resource_type: string;
  resource_id: string;
}

export interface AuditTables {
  audit_streams: AuditStreamsTable;
}

/**
 * Which resource each stream is about, from the stream's first event
 * (`resourceOfStream`): one row per stream, written when its first event is
 * applied, so a burst of reports costs nothing here.
 */
export const auditProjection: Projection = {
  name: 'audit',
  tables: ['audit_streams'],
  async apply(tx, batch) {
    const rows: { s: string; t: string; i: string }[] = [];
    for (const event of batch) {
      if (event.revision !== 0) continue;
      const resource = resourceOfStream(event);
      if (resource) rows.push({ s: event.streamId, t: resource.type, i: resource.id });
    }
    if (rows.length === 0) return;
    await sql`INSERT INTO audit_streams (stream_id, resource_type, resource_id)
      SELECT s, t, i FROM jsonb_to_recordset(${jsonbArray(rows)}::jsonb) AS x(s text, t text, i text)
      ON CONFLICT (stream_id) DO NOTHING`.execute(tx);
  },
};
