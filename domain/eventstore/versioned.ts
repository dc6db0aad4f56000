import type { NewEvent, RecordedEvent } from '../shared/events.js';
import type { EventStore } from './port.js';
import { stamp, upcast, type EventSchemas, EVENT_SCHEMAS } from './schemas.js';

/**
 * The store as the platform uses it: every appended event is stamped with its
 * type's schema version, and every event read (a stream, the global order, a
 * subscription's batches, the audit log's filtered reads) is upcast to the
 * current shape. This is the one place reads go through; the composition
 * root wraps whichever adapter it opened.
 */
export function versioned(store: EventStore, schemas: EventSchemas = EVENT_SCHEMAS): EventStore {
  const up = (events: RecordedEvent[]) => events.map((e) => upcast(e, schemas));
  const stamped = (events: NewEvent[]) => events.map((e) => stamp(e, schemas));
  const wrapped: EventStore = {
    kind: store.kind,
    append: (streamId, events, expected) => store.append(streamId, stamped(events), expected),
    readStream: async (streamId, options) => up(await store.readStream(streamId, options)),
    readAll: async (options) => up(await store.readAll(options)),
    subscribe: (options, handler) => store.subscribe(options, (batch) => handler(up(batch))),
    close: () => store.close(),
  };
  if (store.appendMany) {
    const appendMany = store.appendMany.bind(store);
    wrapped.appendMany = (appends) => appendMany(appends.map((a) => ({ streamId: a.streamId, events: stamped(a.events) })));
  }
  if (store.readStreams) {
    const readStreams = store.readStreams.bind(store);
    wrapped.readStreams = async (streamIds) => up(await readStreams(streamIds));
  }
  if (store.readFiltered) {
    const readFiltered = store.readFiltered.bind(store);
    wrapped.readFiltered = async (filter, options) => up(await readFiltered(filter, options));
  }
  if (store.countAfter) wrapped.countAfter = store.countAfter.bind(store);
  return wrapped;
}
