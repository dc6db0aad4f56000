import type { EventStore } from './port.js';

export function createEsdbStore(_url: string): EventStore {
  throw new Error('the EventStoreDB adapter is being written');
}
