import { suite } from 'uvu';
import { createEsdbStore } from '../../domain/eventstore/esdb.js';
import { eventStoreContract } from './contract.js';

const url = process.env.EVENTSTORE_URL;

if (url) {
  eventStoreContract('EventStoreDB', 'eventstoredb', async () => {
    const store = createEsdbStore(url);
    return { store, close: () => store.close() };
  });
} else {
  // Never faked: without a server the contract is reported as skipped, with the reason.
  const reason = 'EventStoreDB contract skipped: EVENTSTORE_URL is not set, and no EventStoreDB server can run here';
  console.log(`\n  ${reason}`);
  const test = suite('EventStoreDB event store contract');
  test.skip(reason, () => {});
  test.run();
}
