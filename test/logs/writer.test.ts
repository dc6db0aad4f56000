/**
 * The data path's log writer keeps a misbehaving client from turning log
 * entries into a write flood: per resource and minute, 20 entries of one kind
 * and 60 of all kinds together, the rest counted and summed up in one entry
 * once the minute is over. Against a real event store.
 */
import pg from 'pg';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import type { EventStore } from '../../domain/eventstore/port.js';
import { LogWriter } from '../../domain/logs/writer.js';
import { logStream, type LogEntry } from '../../domain/logs/logEntry.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { createTestDatabase } from '../support/cluster.js';
import { eventually } from '../ingest/support.js';

const writer = suite<{ pool: pg.Pool; store: EventStore }>('log writer limits');

writer.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 4 });
  ctx.store = createPostgresStore(ctx.pool);
});
writer.after(async (ctx) => {
  await ctx.pool.end();
});

const entry = (resourceId: string, message: string): LogEntry => ({ resourceId, resourceType: 'credentialsSet', type: 'warning', priority: 'high', category: 'update', message });

/** The messages stored for `resourceId`, once `count` are there and no more came within a short wait. */
async function stored(store: EventStore, resourceId: string, count: number): Promise<string[]> {
  const read = async () => (await store.readStream(logStream(resourceId))).map((e) => (e.data as { message: string }).message);
  await eventually(async () => (await read()).length >= count, 10_000, `${count} log entries`);
  await new Promise((r) => setTimeout(r, 200));
  return read();
}

writer('given 25 entries of one kind within a minute, then 20 are written, and the next minute begins with a summary of the 5 left out', async ({ store }) => {
  let now = new Date('2026-01-01T00:00:00Z');
  const logs = new LogWriter(store, pino({ level: 'silent' }), () => now);
  const set = newResourceId();
  for (let i = 0; i < 25; i++) logs.write(entry(set, `MQTT message on x not stored: bad ${i}`), 'bad payload');
  assert.is((await stored(store, set, 20)).length, 20);
  now = new Date('2026-01-01T00:01:01Z');
  logs.write(entry(set, 'next minute'), 'bad payload');
  const after = await stored(store, set, 22);
  // Both are written at once, fire and forget: their order in the stream is not the point.
  assert.equal(after.slice(20).sort(), ['5 more entries like "bad payload" were left out in the last minute', 'next minute']);
});

writer('given 100 entries of 100 kinds within a minute (a client varying what the kind quotes), then 60 are written, and the next minute sums up the 40 left out', async ({ store }) => {
  let now = new Date('2026-01-01T00:00:00Z');
  const logs = new LogWriter(store, pino({ level: 'silent' }), () => now);
  const set = newResourceId();
  for (let i = 0; i < 100; i++) logs.write(entry(set, `field k${i} must be a finite number`), `field k${i} must be a finite number`);
  assert.is((await stored(store, set, 60)).length, 60);
  now = new Date('2026-01-01T00:01:01Z');
  logs.write(entry(set, 'next minute'), 'another kind');
  const after = await stored(store, set, 62);
  assert.equal(after.slice(60).sort(), ['40 more entries were left out in the last minute', 'next minute']);
  const other = newResourceId();
  logs.write(entry(other, 'another resource'), 'another kind');
  assert.equal(await stored(store, other, 1), ['another resource'], 'each resource has its own limit');
});

writer.run();
