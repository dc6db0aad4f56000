import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Redis } from 'ioredis';
import { sql } from 'kysely';
import { pino } from 'pino';
import { SharedRedeliveries } from '../../ingest/cluster.js';
import { RedisServer } from '../support/redis.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { RawPublisher } from '../support/rawMqtt.js';
import { eventually, givenProvider, type Provider } from '../ingest/support.js';

/**
 * The redelivery memory a cluster shares in Redis, seen from a node that has
 * forgotten what it stored: it remembers two messages itself here, so every
 * older one is known only through Redis.
 */
const TOPIC = 'svc/generic/v2/redeliveries/dev';
const MEMORY = 2;

const memory = suite<{ redis: RedisServer; t: TestPlatform; p: Provider; keys: Redis }>('Cluster: the shared redelivery memory');

memory.before(async (ctx) => {
  ctx.redis = await new RedisServer().start();
  ctx.t = await startTestPlatform({ redisUrl: ctx.redis.url }, { redeliveryMemory: MEMORY });
  ctx.p = await givenProvider(ctx.t, 'redeliveries', [TOPIC]);
  ctx.keys = new Redis(ctx.redis.url);
});
memory.after(async (ctx) => {
  ctx.keys?.disconnect();
  await ctx.t?.stop();
  await ctx.redis?.destroy();
});

/** The stored reports of the device, by their `n`, in the order stored. */
const storedNs = async (t: TestPlatform): Promise<number[]> =>
  (await sql<{ n: number }>`SELECT (data->'payload'->>'n')::int AS n FROM es.events WHERE type = 'DeviceReported' AND data->>'topic' = ${TOPIC} ORDER BY global_position`.execute(t.platform.deps.db)).rows.map((r) => r.n);

/** Publishes `messages` in order on `publisher`, each once the one before is acknowledged. */
async function send(publisher: RawPublisher, messages: { id: number; n: number; dup?: boolean }[]): Promise<void> {
  for (const m of messages) {
    const before = publisher.acks;
    publisher.publish(m.id, TOPIC, JSON.stringify({ n: m.n }), m.dup ?? false);
    await eventually(async () => publisher.acks > before, 10_000, `the PUBACK of packet ${m.id}`);
  }
}

memory('when a device uses a packet id again on the same connection, with the same content, after the node has forgotten the first, then both messages are stored', async ({ t, p }) => {
  const publisher = new RawPublisher(t.mqttPort);
  await publisher.connect(p.username, p.password);
  try {
    // Given a message stored under packet id 1, then more than the node remembers under other ids.
    await send(publisher, [{ id: 1, n: 1 }, { id: 2, n: 2 }, { id: 3, n: 3 }, { id: 4, n: 4 }]);
    // When the device uses id 1 again for the same content, as a device with one message in flight may.
    await send(publisher, [{ id: 1, n: 1 }]);
  } finally {
    publisher.close();
  }
  // Then it is a new message: the connection had its acknowledgement of the first.
  assert.equal(await storedNs(t), [1, 2, 3, 4, 1]);
});

memory('when the device reconnects and sends a stored message again with DUP clear, after the node has forgotten it, then it is recognised and stored once', async ({ t, p }) => {
  const before = await storedNs(t);
  const publisher = new RawPublisher(t.mqttPort);
  await publisher.connect(p.username, p.password);
  try {
    // Packet id 2 carried n = 2 on the earlier connection; MQTT.js re-sends after a reconnect with DUP clear.
    await send(publisher, [{ id: 2, n: 2 }]);
    // And a re-send with DUP set of another forgotten one.
    await send(publisher, [{ id: 3, n: 3, dup: true }]);
  } finally {
    publisher.close();
  }
  assert.equal(await storedNs(t), before, 'nothing stored again');
});

memory('when messages are stored, then Redis keeps them in a hash of their time, which expires unless a node retires it first', async ({ keys }) => {
  const buckets = await keys.keys('platform:redeliveries:*');
  // A run that crosses the edge of a 5-minute bucket writes into two.
  assert.ok(buckets.length >= 1 && buckets.length <= 2, `one hash per 5 minutes (${buckets.join(', ')})`);
  const fields = new Set<string>();
  for (const bucket of buckets) {
    for (const f of await keys.hkeys(bucket)) fields.add(f);
    const ttl = await keys.ttl(bucket);
    assert.ok(ttl > 19 * 60 && ttl <= 25 * 60, `${bucket} expires in ${ttl} s (retired by the nodes after 15 to 20)`);
  }
  // One field per redelivery key stored so far: packet ids 1 to 4 of one client, however often each was used.
  assert.is(fields.size, 4);
  assert.is((await keys.keys('platform:redelivery:*')).length, 0, 'no key per message');
});

memory.run();

// ---------------------------------------------------------------------------

const buckets = suite<{ redis: RedisServer; keys: Redis }>('Cluster: the redelivery memory over time');

buckets.before(async (ctx) => {
  ctx.redis = await new RedisServer().start();
  ctx.keys = new Redis(ctx.redis.url);
});
buckets.after(async (ctx) => {
  ctx.keys?.disconnect();
  await ctx.redis?.destroy();
});

const MINUTE = 60_000;

buckets('when 20 minutes pass, then an entry counts for at least 15 of them, and the record that retires its hash deletes it', async ({ keys }) => {
  // The clock starts at the start of the current 5 minutes (Redis expires the hashes by its own clock), called 12:00 below.
  const noon = Math.floor(Date.now() / (5 * MINUTE)) * 5 * MINUTE;
  let now = noon;
  const memory = new SharedRedeliveries(keys, pino({ level: 'silent' }), () => now);
  const stored = { key: 'set\u0000client\u00007', hash: '0123456789abcdef', connection: 'conn-a' };

  // Given an entry recorded at 12:00.
  await memory.put([stored]);
  const first = await keys.keys('platform:redeliveries:*');
  assert.is(first.length, 1);

  // Then every look-up until 12:15 finds it, with its connection, while others record beside it.
  for (let minute = 1; minute < 15; minute++) {
    now += MINUTE;
    await memory.put([{ key: `other-${minute}`, hash: 'ffffffffffffffff', connection: null }]);
    assert.equal(await memory.get([stored.key, 'never']), [{ hash: stored.hash, connection: 'conn-a' }, null], `at 12:${String(minute).padStart(2, '0')}`);
  }

  // When a record is made at 12:20, the 12:00 hash is gone at once: retired, not left to expire.
  now = noon + 20 * MINUTE;
  await memory.put([{ key: 'late', hash: 'eeeeeeeeeeeeeeee', connection: null }]);
  assert.is(await keys.exists(first[0]!), 0);
  assert.equal(await memory.get([stored.key]), [null]);
  assert.equal(await memory.get(['other-14']), [{ hash: 'ffffffffffffffff', connection: null }], 'the newer hashes stay');
});

buckets.run();
