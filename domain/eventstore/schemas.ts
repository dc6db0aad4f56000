import type { NewEvent, RecordedEvent } from '../shared/events.js';
import { deviceSchemas } from '../devices/device.js';
import { translatorSchemas } from '../translators/translator.js';
import { connectorSchemas } from '../connectors/connector.js';

/**
 * Event schema versions and the upcasters that bring an event stored in an
 * older shape to today's, so deciders, read models, reactors and the audit
 * log only ever see the current shape of each event type.
 *
 * Every event carries the version of its data's shape in
 * `metadata.schemaVersion`, stamped when it is appended. Events stored before
 * versions were recorded carry none and count as version 1. A capability that
 * changes an event's data raises its version and adds the upcaster from the
 * previous one, beside the event's type in its own `domain/` module; a type
 * no capability lists is at version 1.
 */
export interface EventSchema {
  /** The version of the shape written today. */
  version: number;
  /** `upcast[n]` turns data of version `n` into version `n + 1`; one for each version below `version`. */
  upcast: Record<number, (data: Record<string, unknown>) => Record<string, unknown>>;
  /**
   * The type is no longer written. Its events stay readable; what, if
   * anything, still applies them is said beside it.
   */
  retired?: string;
}

export type EventSchemas = Record<string, EventSchema>;

/** Every capability's event schemas that are past version 1 or retired. */
export const EVENT_SCHEMAS: EventSchemas = { ...deviceSchemas, ...translatorSchemas, ...connectorSchemas };

export const currentVersion = (type: string, schemas: EventSchemas = EVENT_SCHEMAS): number => schemas[type]?.version ?? 1;

/** The version an event was stored with (1 when it predates versions). */
export const storedVersion = (event: { metadata: { schemaVersion?: number } }): number => event.metadata.schemaVersion ?? 1;

/** The event in today's shape: its data upcast step by step, its metadata naming the version it now has. */
export function upcast<E extends RecordedEvent>(event: E, schemas: EventSchemas = EVENT_SCHEMAS): E {
  const target = currentVersion(event.type, schemas);
  let version = storedVersion(event);
  if (version === target) return event;
  if (version > target) {
    // Written by a newer release than this one (a rollback): read as it is rather than guessed at.
    return event;
  }
  let data = event.data as Record<string, unknown>;
  const steps = schemas[event.type]!.upcast;
  for (; version < target; version++) {
    const step = steps[version];
    if (!step) throw new Error(`no upcaster for ${event.type} from version ${version}`);
    data = step(data);
  }
  return { ...event, data, metadata: { ...event.metadata, schemaVersion: target } };
}

/** The event as it is appended: stamped with its type's current version unless it already names one. */
export function stamp(event: NewEvent, schemas: EventSchemas = EVENT_SCHEMAS): NewEvent {
  if (event.metadata.schemaVersion !== undefined) return event;
  return { ...event, metadata: { ...event.metadata, schemaVersion: currentVersion(event.type, schemas) } };
}
