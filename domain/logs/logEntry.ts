import type { EventStore } from '../eventstore/port.js';
import { toNewEvent, type CommandContext } from '../shared/decider.js';
import { newEventId } from '../shared/ids.js';
import { storableText } from '../shared/json.js';

/**
 * Log entries shown to users (the `logs` widget, `GET /api/logs`): what
 * happened to a device, a credentials set or a channel that its owner should
 * know, such as a refused publish or a channel delivery that finally failed.
 * Each is an event on the stream `logs-<resourceId>`. An entry may carry an
 * expiry; expired entries are purged from the read model.
 */
export const LOG_TYPES = ['error', 'warning', 'info', 'verbose', 'debug'] as const;
export const LOG_PRIORITIES = ['severe', 'high', 'medium', 'low'] as const;
export const LOG_CATEGORIES = ['update', 'command', 'status', 'access', 'analytics', 'rule', 'system'] as const;

export type LogType = (typeof LOG_TYPES)[number];
export type LogPriority = (typeof LOG_PRIORITIES)[number];
export type LogCategory = (typeof LOG_CATEGORIES)[number];

export interface LogEntry {
  resourceId: string;
  /** `device`, `credentialsSet`, `channel`, … as in access rights. */
  resourceType: string;
  type: LogType;
  priority: LogPriority;
  category: LogCategory;
  message: string;
  /** ISO 8601; entries are purged after it. Translator errors, for one, are kept 6 hours. */
  expiresAt?: string;
  data?: Record<string, unknown>;
}

export type LogEvent = { type: 'LogEntryWritten'; data: LogEntry & { id: string; at: string } };

export const logStream = (resourceId: string) => `logs-${resourceId}`;

/** How long translator errors are kept, as the contract says. */
export const TRANSLATOR_ERROR_RETENTION_MS = 6 * 3600 * 1000;

/**
 * The entry as an event. Messages quote what clients sent (topics, field
 * names, a translator's error), so their text is made storable here, where
 * every entry passes: a NUL in a topic must not cost the log entry that
 * reports it.
 */
export function logEvent(entry: LogEntry, at: string, id: string = newEventId()): LogEvent {
  const { data, ...rest } = entry;
  return { type: 'LogEntryWritten', data: { ...rest, message: storableText(entry.message), ...(data === undefined ? {} : { data: storable(data) as Record<string, unknown> }), id, at } };
}

/** A JSON value with every string and key made storable. */
function storable(value: unknown): unknown {
  if (typeof value === 'string') return storableText(value);
  if (Array.isArray(value)) return value.map(storable);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [storableText(k), storable(v)]));
  return value;
}

/** Appends one entry; log streams only grow, so any revision is fine. */
export async function writeLog(store: EventStore, entry: LogEntry, context: CommandContext): Promise<void> {
  const event = logEvent(entry, context.now);
  await store.append(logStream(entry.resourceId), [toNewEvent(event, context, event.data.id)], 'any');
}
