import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, givenProvider, type Provider } from './support.js';

const ROOT = 'svc/generic/v2/burst';
const DEVICES = 6;
const CONNECTIONS = 2;
const MESSAGES = 2000;
const TOPICS = Array.from({ length: DEVICES }, (_, i) => `${ROOT}/d${i}`);

interface Stored {
  stream_id: string;
  rev: number;
  tx: string;
  topic: string;
  seq: number;
  correlation: string;
  actor: string;
  id: string;
  position: string;
}

const pipeline = suite<{ t: TestPlatform; p: Provider; started: number; stored: Stored[]; sent: Map<string, { topic: string; payload: string; clientId: string }> }>('Ingest pipeline under a QoS 1 burst');

pipeline.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  ctx.started = Date.now();
  const p = (ctx.p = await givenProvider(t, 'burst', TOPICS));
  // Each device publishes over one connection (MQTT orders messages per connection); the devices are spread over both.
  const clients = await Promise.all(Array.from({ length: CONNECTIONS }, (_, i) => connectMqtt(t, p.username, p.password, { clientId: `burst-${i}` })));
  const next = new Array<number>(DEVICES).fill(0);
  const sent = (ctx.sent = new Map());
  const acks: Promise<unknown>[] = [];
  for (let n = 0; n < MESSAGES; n++) {
    const device = n % DEVICES;
    const seq = ++next[device]!;
    const client = clients[device % CONNECTIONS]!;
    const topic = TOPICS[device]!;
    const payload = JSON.stringify({ seq, device });
    sent.set(`${topic}#${seq}`, { topic, payload, clientId: client.options.clientId! });
    acks.push(client.publishAsync(topic, payload, { qos: 1 }));
  }
  await Promise.all(acks);
  await Promise.all(clients.map((c) => c.endAsync()));
  // Every message was acknowledged, so every event is stored.
  const { rows } = await sql<Stored>`SELECT stream_id, revision::int AS rev, transaction_id::text AS tx, data->>'topic' AS topic, (data->'payload'->>'seq')::int AS seq,
      metadata->>'correlationId' AS correlation, metadata->>'actor' AS actor, event_id AS id, global_position::text AS position
    FROM es.events WHERE type = 'DeviceReported' AND data->>'topic' LIKE ${`${ROOT}/%`} ORDER BY stream_id, revision`.execute(t.platform.deps.db);
  ctx.stored = rows;
});
pipeline.after(async (ctx) => {
  await ctx.t.stop();
});

pipeline('when every message is acknowledged, then each is stored exactly once', async ({ stored }) => {
  assert.is(stored.length, MESSAGES);
  assert.is(new Set(stored.map((r) => `${r.topic}#${r.seq}`)).size, MESSAGES);
});

pipeline('then each device stream holds its messages in the order they were published', async ({ stored }) => {
  const streams = new Map<string, { topic: string; seqs: number[] }>();
  for (const r of stored) {
    const s = streams.get(r.stream_id) ?? { topic: r.topic, seqs: [] };
    assert.is(r.topic, s.topic, 'one device per reserved topic');
    s.seqs.push(r.seq);
    streams.set(r.stream_id, s);
  }
  assert.is(streams.size, DEVICES);
  for (const [stream, { seqs }] of streams) {
    const expected = Array.from({ length: seqs.length }, (_, i) => i + 1);
    assert.equal(seqs, expected, `${stream}: seq values in revision order`);
  }
});

pipeline('then the burst is written in few transactions', async ({ stored }) => {
  const transactions = new Set(stored.map((r) => r.tx)).size;
  console.log(`    ${MESSAGES} reports were stored in ${transactions} transactions`);
  assert.ok(transactions <= 100, `${MESSAGES} reports took ${transactions} transactions; batching should need at most 100`);
  assert.ok(transactions < MESSAGES / 10, `${transactions} transactions for ${MESSAGES} reports`);
});

pipeline('then each report carries a time-ordered (version 7) event id, made as it was stored', async ({ stored, started }) => {
  const timeOf = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
  const inLog = [...stored].sort((a, b) => Number(BigInt(a.position) - BigInt(b.position)));
  for (const r of inLog) {
    assert.match(r.id, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.ok(timeOf(r.id) >= started && timeOf(r.id) <= Date.now(), `${r.id} was made during the burst`);
  }
  // One batch is decided and stored after the other, so each batch's ids are no older than the batch's before it.
  const batches: { first: number; last: number }[] = [];
  let tx = '';
  for (const r of inLog) {
    if (r.tx !== tx) batches.push({ first: Infinity, last: 0 });
    tx = r.tx;
    const b = batches[batches.length - 1]!;
    b.first = Math.min(b.first, timeOf(r.id));
    b.last = Math.max(b.last, timeOf(r.id));
  }
  for (let i = 1; i < batches.length; i++) assert.ok(batches[i - 1]!.last <= batches[i]!.first, `batch ${i - 1} ends at ${batches[i - 1]!.last}, batch ${i} starts at ${batches[i]!.first}`);
});

pipeline('then each event names the credentials set as actor and its MQTT message as correlation id', async ({ p, stored, sent }) => {
  const seen = new Set<string>();
  for (const r of stored) {
    assert.is(r.actor, `credentials:${p.setId}`);
    const message = sent.get(`${r.topic}#${r.seq}`)!;
    const m = /^mqtt:([0-9a-f]{16}):(\d+):(.+)$/.exec(r.correlation);
    assert.ok(m, `correlation id ${r.correlation} is mqtt:<hash>:<packet id>:<client id>`);
    const hash = createHash('sha1').update(message.topic).update('\u0000').update(message.payload).digest('hex').slice(0, 16);
    assert.is(m![1], hash, 'the hash of the topic and payload');
    assert.ok(Number(m![2]) >= 1 && Number(m![2]) <= 65535, 'a QoS 1 packet id');
    assert.is(m![3], message.clientId, 'the publishing connection');
    seen.add(r.correlation);
  }
  assert.is(seen.size, MESSAGES, 'one correlation id per message');
});

pipeline.run();
