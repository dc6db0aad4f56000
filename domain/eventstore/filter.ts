import type { RecordedEvent } from '../shared/events.js';
import type { EventFilter, EventStore, ReadAllOptions } from './port.js';

/** Whether an event meets every criterion of the filter. */
export function matches(filter: EventFilter, event: RecordedEvent): boolean {
  if (filter.streamIds && !filter.streamIds.includes(event.streamId)) return false;
  if (filter.types && !filter.types.includes(event.type)) return false;
  if (filter.actor !== undefined && event.metadata.actor !== filter.actor) return false;
  if (filter.correlationId !== undefined && event.metadata.correlationId !== filter.correlationId) return false;
  if (filter.from !== undefined && !(event.metadata.time >= filter.from)) return false;
  if (filter.to !== undefined && !(event.metadata.time < filter.to)) return false;
  return true;
}

/** How many events a scan reads per round trip. */
const SCAN_BATCH = 2000;

/**
 * Events that match `filter`, in global order, after `after`, at most
 * `limit`: through the store's `readFiltered` when it has one, otherwise by
 * scanning `readAll` and keeping what matches (EventStoreDB: correct, and as
 * slow as the log is long).
 */
export async function readMatching(store: EventStore, filter: EventFilter, { after, limit }: ReadAllOptions): Promise<RecordedEvent[]> {
  if (filter.streamIds?.length === 0) return [];
  if (store.readFiltered) return store.readFiltered(filter, { after: after ?? null, limit });
  const found: RecordedEvent[] = [];
  let position = after ?? null;
  for (;;) {
    const batch = await store.readAll({ after: position, limit: SCAN_BATCH });
    for (const event of batch) {
      if (!matches(filter, event)) continue;
      found.push(event);
      if (found.length === limit) return found;
    }
    if (batch.length < SCAN_BATCH) return found;
    position = batch[batch.length - 1]!.position;
  }
}
