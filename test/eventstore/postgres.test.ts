import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { EventStore } from '../../domain/eventstore/port.js';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import { JSON_CHUNK, jsonbArray } from '../../domain/shared/jsonb.js';
import { createTestDatabase } from '../support/cluster.js';
import { eventStoreContract, newEvent, streamName } from './contract.js';

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

const batches = suite<{ pool: pg.Pool; store: EventStore }>('PostgreSQL event store: batch appends');

batches.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 2 });
  ctx.store = createPostgresStore(ctx.pool, { pollMs: 20 });
});
batches.after(async (ctx) => {
  await ctx.store.close();
  await ctx.pool.end();
});

/** Text that JSON escapes or that UTF-8 writes in several bytes (not NUL, which no jsonb holds). */
const awkward = ['°C', 'Åäö', '🌡️', 'a "quoted" \\ path', 'line\nbreak', '\u2028', '[', ']', ','];

const asText = (param: string | Buffer): string => {
  if (typeof param === 'string') return param;
  assert.is(param[0], 1, 'the binary form of jsonb starts with its version, 1');
  return param.subarray(1).toString('utf8');
};

batches('given arrays of every length around the chunk size, then the parameter is the JSON text of the array', () => {
  for (const length of [0, 1, JSON_CHUNK - 1, JSON_CHUNK, JSON_CHUNK + 1, 2 * JSON_CHUNK, 2 * JSON_CHUNK + 1, 200]) {
    const items = Array.from({ length }, (_, i) => ({ i, text: awkward[i % awkward.length], nested: { list: [i, awkward[(i + 3) % awkward.length]] } }));
    const param = jsonbArray(items);
    assert.is(asText(param), JSON.stringify(items), `${length} items`);
    assert.is(typeof param === 'string', length <= JSON_CHUNK, `${length} items: text up to one chunk, the binary form past it`);
  }
});

batches('given a batch of several chunks over many streams, when appended at once, then every event is stored as given, in order, and the answer is the last one\'s position', async ({ store }) => {
  const streams = Array.from({ length: 50 }, () => streamName('batch'));
  const appends = streams.map((streamId, s) => ({
    streamId,
    events: [0, 1, 2].map((k) => newEvent('Measured', { s, k, unit: awkward[(s + k) % awkward.length], note: awkward.join('') })),
  }));
  const from = (await store.append(streamName('before'), [newEvent('Marked')], 'no_stream')).position;
  const last = await store.appendMany!(appends);
  const read = (await store.readAll({ after: from, limit: 1000 })).filter((e) => e.type === 'Measured');
  assert.equal(last, read.at(-1)!.position, 'the answer is the position of the last event appended');
  assert.is(await store.appendMany!([{ streamId: streams[0]!, events: [] }]), null, 'nothing appended, no position');
  const sent = appends.flatMap((a) => a.events.map((e, revision) => ({ id: e.id, streamId: a.streamId, revision, data: e.data })));
  assert.is(read.length, 150);
  assert.equal(
    read.map((e) => ({ id: e.id, streamId: e.streamId, revision: e.revision, data: e.data })),
    sent,
  );
});

batches.run();
