import { performance } from 'node:perf_hooks';
import type { Histogram } from 'prom-client';
import type { EventStore } from './port.js';

/** What the event store reports: the time each append takes, its commit included. */
export interface StoreMetrics {
  appendSeconds: Histogram<'operation'>;
}

/**
 * The store with its appends timed (`append`: one stream; `appendMany`: an
 * ingest batch over many streams). Reads and subscriptions pass through
 * untouched. A failed append is timed too: a slow refusal is still slow.
 */
export function measuredStore(store: EventStore, metrics: StoreMetrics): EventStore {
  const single = metrics.appendSeconds.labels('append');
  const many = metrics.appendSeconds.labels('appendMany');
  const timed = async <T>(histogram: typeof single, run: () => Promise<T>): Promise<T> => {
    const started = performance.now();
    try {
      return await run();
    } finally {
      histogram.observe((performance.now() - started) / 1000);
    }
  };
  const appendMany = store.appendMany;
  return {
    kind: store.kind,
    append: (streamId, events, expected) => timed(single, () => store.append(streamId, events, expected)),
    ...(appendMany ? { appendMany: (appends: Parameters<typeof appendMany>[0]) => timed(many, () => appendMany.call(store, appends)) } : {}),
    readStream: (streamId, options) => store.readStream(streamId, options),
    readStreams: store.readStreams ? (streamIds) => store.readStreams!(streamIds) : undefined,
    readAll: (options) => store.readAll(options),
    subscribe: (options, handler) => store.subscribe(options, handler),
    countAfter: store.countAfter ? (after, cap) => store.countAfter!(after, cap) : undefined,
    readFiltered: store.readFiltered ? (filter, options) => store.readFiltered!(filter, options) : undefined,
    close: () => store.close(),
  };
}
