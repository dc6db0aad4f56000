import type { EventStore } from './port.js';

/** `store`, its reads made through `reads` (another connection pool to the same store); appends and subscriptions stay `store`'s. */
export function readingThrough(store: EventStore, reads: EventStore): EventStore {
  return {
    kind: store.kind,
    append: (streamId, events, expected) => store.append(streamId, events, expected),
    ...(store.appendMany ? { appendMany: store.appendMany.bind(store) } : {}),
    readStream: (streamId, options) => reads.readStream(streamId, options),
    ...(reads.readStreams ? { readStreams: reads.readStreams.bind(reads) } : {}),
    readAll: (options) => reads.readAll(options),
    ...(reads.countAfter ? { countAfter: reads.countAfter.bind(reads) } : {}),
    ...(reads.readFiltered ? { readFiltered: reads.readFiltered.bind(reads) } : {}),
    subscribe: (options, handler) => store.subscribe(options, handler),
    close: () => store.close(),
  };
}
