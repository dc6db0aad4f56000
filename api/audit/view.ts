import type { RecordedEvent } from '../../domain/shared/events.js';
import { positionToString } from '../../domain/shared/events.js';
import { redact } from '../../domain/audit/redact.js';

/** An event as the audit log shows it: metadata lifted to the top, `data` redacted. */
export interface AuditEvent {
  /** The event's place in the global order, `<commit>/<prepare>`. */
  position: string;
  id: string;
  streamId: string;
  revision: number;
  type: string;
  schemaVersion: number;
  time: string;
  actor: string;
  correlationId: string;
  causationId: string | null;
  data: unknown;
}

export const auditView = (e: RecordedEvent): AuditEvent => ({
  position: positionToString(e.position),
  id: e.id,
  streamId: e.streamId,
  revision: e.revision,
  type: e.type,
  schemaVersion: e.metadata.schemaVersion ?? 1,
  time: e.metadata.time,
  actor: e.metadata.actor,
  correlationId: e.metadata.correlationId,
  causationId: e.metadata.causationId ?? null,
  data: redact(e.data),
});
