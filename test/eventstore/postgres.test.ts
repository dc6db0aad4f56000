import pg from 'pg';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import { createTestDatabase } from '../support/cluster.js';
import { eventStoreContract } from './contract.js';

eventStoreContract('PostgreSQL', 'postgres', async () => {
  // Room for the contract's eight concurrent writers.
  const pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 12 });
  const store = createPostgresStore(pool, { pollMs: 20 });
  return {
    store,
    async close() {
      await store.close();
      await pool.end();
    },
  };
});
