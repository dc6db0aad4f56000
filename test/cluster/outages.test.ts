import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createTestDatabase } from '../support/cluster.js';
import { startPrivateCluster, type PrivateCluster } from '../../migrations/cluster.js';
import { RedisServer } from '../support/redis.js';
import { LEADER_PARTS, PlatformNode, until } from '../support/nodes.js';
import { RawPublisher } from '../support/rawMqtt.js';

/**
 * A cluster's bad days: a node killed in the middle of a QoS 1 burst, Redis
 * restarted, PostgreSQL restarted. Each time the nodes reconnect, no
 * acknowledged message is lost, and health and logs say what a node waits for.
 */
const TOPIC = 'svc/generic/v2/outage/dev';
/** The topic of the burst a node is killed in; the Redis tests that follow on the same cluster publish on `TOPIC`. */
const BURST_TOPIC = 'svc/generic/v2/outage/burst';

/** A credentials set `username` (password `fleet-password`) with `topic` reserved to it. */
async function givenFleet(node: PlatformNode, username = 'fleet', topic = TOPIC): Promise<string> {
  const set = await node.call('POST', '/api/basic-credentials-sets', { username, password: 'fleet-password' });
  assert.is(set.status, 201, set.text);
  assert.is((await node.call('POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set.body._id })).status, 201);
  return set.body._id as string;
}

/** The `seq` of every report stored from `topic`. */
const storedSeqs = async (db: pg.Pool, topic = TOPIC): Promise<number[]> =>
  (await db.query<{ seq: number }>(`SELECT (data->'payload'->>'seq')::int AS seq FROM es.events WHERE type = 'DeviceReported' AND stream_id LIKE 'device-%' AND data->>'topic' = $1`, [topic])).rows.map((r) => r.seq);

const seqOf = (payload: Buffer) => JSON.parse(String(payload)).diff?.seq as number | undefined;

/** SIGTERM to `node`: whether it exited within `ms`, and how long it took (or had taken when given up on). */
async function stopWithin(node: PlatformNode, ms: number): Promise<{ stopped: boolean; after: number }> {
  const started = Date.now();
  const stopped = await Promise.race([node.stop().then(() => true), new Promise<false>((r) => setTimeout(() => r(false), ms))]);
  return { stopped, after: Date.now() - started };
}

// ---------------------------------------------------------------------------

/*
 * A node killed mid-batch, then Redis restarted: two nodes on one database and one Redis, shared by these tests
 * (each with a topic of its own); the node the first test kills is started again for the tests after it.
 */
const twoNodes = suite<{ redis: RedisServer; db: pg.Pool; nodes: PlatformNode[] }>('Cluster: a node killed mid-batch, then Redis restarted');

twoNodes.before(async (ctx) => {
  ctx.redis = await new RedisServer().start();
  const url = await createTestDatabase();
  ctx.db = new pg.Pool({ connectionString: url, max: 2 });
  const env = { DATABASE_URL: url, REDIS_URL: ctx.redis.url };
  const a = await new PlatformNode('node-a', env).start();
  ctx.nodes = [a, await new PlatformNode('node-b', env).start()];
});
twoNodes.after(async (ctx) => {
  await Promise.all((ctx.nodes ?? []).map((n) => n.stop()));
  await ctx.db?.end();
  await ctx.redis?.destroy();
});

twoNodes('when the node a device publishes to, which leads the read models, is killed mid-burst, then every acknowledged message is stored, and once the device sends the rest to the other node each is stored and applied exactly once', async ({ db, nodes }) => {
  const [a, b] = nodes as [PlatformNode, PlatformNode];
  await givenFleet(b, 'burst', BURST_TOPIC);
  const leader = await until(async () => ((await a.leading()).includes('read-models') ? a : (await b.leading()).includes('read-models') ? b : null), 10_000, 'a leader');
  const other = leader === a ? b : a;
  const BURST = 2000;
  const publisher = new RawPublisher(leader.mqtt);
  await until(async () => publisher.connect('burst', 'fleet-password').then(() => true, () => false), 5_000, 'the leader to accept the credentials set');
  for (let seq = 1; seq <= BURST; seq++) publisher.publish(seq, BURST_TOPIC, JSON.stringify({ seq }), false);
  await until(() => publisher.acked.size >= 200, 30_000, 'the first acknowledgements');
  await leader.kill();
  const acked = new Set(publisher.acked);
  publisher.close();
  assert.ok(acked.size < BURST, 'killed mid-burst');

  const afterKill = await storedSeqs(db, BURST_TOPIC);
  assert.is(new Set(afterKill).size, afterKill.length, 'nothing stored twice');
  for (const seq of acked) assert.ok(afterKill.includes(seq), `acknowledged message ${seq} is stored`);

  // The device sends again what was not acknowledged, to the other node, with its packet ids and DUP set, as MQTT asks.
  const again = new RawPublisher(other.mqtt);
  await again.connect('burst', 'fleet-password');
  for (let seq = 1; seq <= BURST; seq++) if (!acked.has(seq)) again.publish(seq, BURST_TOPIC, JSON.stringify({ seq }), true);
  await until(() => again.acked.size === BURST - acked.size, 60_000, 'the re-sent messages to be acknowledged');
  again.close();
  const final = await storedSeqs(db, BURST_TOPIC);
  assert.is(final.length, BURST, `every message exactly once (stored by the killed node without an answer: ${afterKill.length - acked.size})`);
  assert.is(new Set(final).size, BURST);

  // The survivor took over the read models and applied each report once.
  await until(async () => (await other.leading()).includes('read-models'), 10_000, 'the survivor to lead the read models');
  const history = async () => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM device_history h JOIN devices d ON d.id = h.device_id WHERE d.secret = $1 AND h.fields ? 'seq'`, [BURST_TOPIC])).rows[0]!.n);
  await until(async () => (await history()) >= BURST, 20_000, 'the history of every report');
  await new Promise((r) => setTimeout(r, 500));
  assert.is(await history(), BURST, 'each report applied once');
});

twoNodes('when Redis restarts, then health stays 200 and says degraded, naming Redis, as do the logs, devices are still acknowledged once stored, and afterwards the consumer\'s session on the other node has every message', async ({ redis, db, nodes }) => {
  const [a, b] = nodes as [PlatformNode, PlatformNode];
  // Given both nodes up: the one killed in the test before started again, every part led by one of them.
  for (const node of nodes) if (!node.alive) await node.start();
  for (const node of nodes) await node.healthSays('ok', 20_000);
  await until(async () => ((await a.leading()).length + (await b.leading()).length) === LEADER_PARTS.length, 15_000, 'every part led');
  const setId = await givenFleet(a);
  const device = await until(() => a.mqttClient('fleet', 'fleet-password', { clientId: 'dev' }).catch(() => null), 5_000, 'node A to accept the set');
  await device.publishAsync(TOPIC, JSON.stringify({ seq: 0 }), { qos: 1 });
  const id = await until(async () => (await db.query<{ id: string }>('SELECT id FROM devices WHERE secret = $1', [TOPIC])).rows[0]?.id, 10_000, 'the device');
  assert.is((await a.call('POST', '/api/channels', { iotnode: id, mqtt: { type: 'basicCredentialsSet', recipient: setId } })).status, 201);
  const got = new Set<number>();
  const listen = (_t: string, p: Buffer) => {
    const seq = seqOf(p);
    if (seq !== undefined) got.add(seq);
  };
  let consumer = await b.mqttClient('fleet', 'fleet-password', { clientId: 'consumer', clean: false }, listen);
  await consumer.subscribeAsync(`svc/output/v2/${setId}/#`, { qos: 1 });
  for (let seq = 1; seq <= 10; seq++) await device.publishAsync(TOPIC, JSON.stringify({ seq }), { qos: 1 });
  await until(() => got.size >= 10, 10_000, 'the first ten messages on node B');

  // When Redis stops.
  await redis.stop();
  try {
    for (const node of nodes) {
      // The node serves on without Redis: it stays in its load balancer, and says what it does without.
      const h = await node.healthSays('degraded', 10_000);
      assert.is(h.status, 200, JSON.stringify(h.body));
      assert.is(h.body.cluster.redis, false, JSON.stringify(h.body));
      assert.ok((h.body.cluster.waitingFor as string[]).some((w) => w.startsWith('Redis')), JSON.stringify(h.body));
      // The log line travels through the node's stdout, which can trail its health on a busy machine.
      await until(() => node.logs.some((l) => String(l.msg).includes('Redis connection lost')), 5_000, `${node.name} to log the lost Redis connection`);
    }
    // Devices are still taken in: acknowledged once stored in PostgreSQL.
    for (let seq = 11; seq <= 20; seq++) await device.publishAsync(TOPIC, JSON.stringify({ seq }), { qos: 1 });
    const during = await storedSeqs(db);
    for (let seq = 11; seq <= 20; seq++) assert.ok(during.includes(seq), `message ${seq} acknowledged during the outage is stored`);
  } finally {
    // When Redis is back (the next test needs it, whatever happened above),
    await redis.start();
  }

  // then health is ok again and the consumer's session has everything.
  for (const node of nodes) assert.is((await node.healthSays('ok', 20_000)).status, 200);
  await until(() => a.logs.some((l) => String(l.msg).includes('Redis connection back')), 5_000, 'node A to log that Redis is back');
  for (let seq = 21; seq <= 25; seq++) await device.publishAsync(TOPIC, JSON.stringify({ seq }), { qos: 1 });
  // A message published while this node's subscription to the bus was down is in the session's queue: a reconnect fetches it.
  const complete = () => [...Array(25).keys()].every((i) => got.has(i + 1));
  await until(async () => {
    if (complete()) return true;
    consumer.end(true);
    // A consumer retries a connection that got no CONNACK in time (the node restores the session from Redis, which just came back).
    const next = await b.mqttClient('fleet', 'fleet-password', { clientId: 'consumer', clean: false }, listen).catch(() => null);
    if (!next) return false;
    consumer = next;
    await new Promise((r) => setTimeout(r, 1000));
    return complete();
  }, 45_000, 'the consumer to have messages 1 to 25').catch((err: Error) => {
    throw new Error(`${err.message}; missing: ${[...Array(25).keys()].map((i) => i + 1).filter((seq) => !got.has(seq)).join(', ')}`);
  });
  consumer.end(true);
  device.end(true);
});

twoNodes('when the node leading the output topics is stopped while Redis is away and a report waits to go out, then it stops within seconds, and the node that takes over publishes the report once Redis is back', async ({ redis, db, nodes }) => {
  const leader = await until(async () => {
    for (const node of nodes) if ((await node.leading()).includes('output-mqtt')) return node;
    return null;
  }, 10_000, 'the leader of the output topics');
  const other = nodes.find((n) => n !== leader)!;
  const device = await other.mqttClient('fleet', 'fleet-password', { clientId: 'dev-2' });
  /** Whether the report is stored, and whether the output topics' checkpoint has passed it (published: at least once). */
  const report = async () => {
    const { rows } = await db.query<{ passed: boolean | null }>(
      `SELECT c.commit_position >= e.transaction_id::text::numeric AS passed
       FROM es.events e LEFT JOIN es.checkpoints c ON c.name = 'output-mqtt'
       WHERE e.type = 'DeviceReported' AND e.data->>'topic' = $1 AND e.data->'payload'->>'seq' = '26'`,
      [TOPIC],
    );
    return { stored: rows.length, published: rows[0]?.passed === true };
  };
  await redis.stop();
  try {
    await leader.healthSays('degraded', 10_000);
    // Acknowledged once stored; the leader's output reactor then waits for Redis to publish it.
    await device.publishAsync(TOPIC, JSON.stringify({ seq: 26 }), { qos: 1 });
    await new Promise((r) => setTimeout(r, 500));
    const stop = await stopWithin(leader, 15_000);
    assert.ok(stop.stopped, `the leader stopped on SIGTERM while Redis was away (still running after ${stop.after} ms)`);
    await until(() => leader.logs.some((l) => String(l.msg).includes('stopping while Redis is away')), 5_000, 'the leader to say what it dropped');
    assert.equal(await report(), { stored: 1, published: false }, 'the stopped leader did not count the report as published');
  } finally {
    await redis.start();
  }
  device.end(true);

  // The other node takes the output topics over from the checkpoint the stopped one never moved past the report.
  await until(async () => (await other.leading()).includes('output-mqtt'), 15_000, 'the other node to lead the output topics');
  await until(async () => (await report()).published, 30_000, 'the node that took over to publish the report');
  assert.is((await report()).stored, 1, 'the report is stored once');
});

twoNodes.run();

// ---------------------------------------------------------------------------

const pgDown = suite<{ dir: string; pg: PrivateCluster; redis: RedisServer; db: pg.Pool; nodes: PlatformNode[] }>('Cluster: PostgreSQL restarted');

pgDown.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'cluster-pg-'));
  ctx.pg = startPrivateCluster(ctx.dir, 'platform', { fast: true });
  ctx.redis = await new RedisServer().start();
  const url = ctx.pg.url('platform');
  ctx.db = new pg.Pool({ connectionString: url, max: 2 });
  ctx.db.on('error', () => undefined);
  const env = { DATABASE_URL: url, REDIS_URL: ctx.redis.url };
  const a = await new PlatformNode('node-a', env).start();
  ctx.nodes = [a, await new PlatformNode('node-b', env).start()];
});
pgDown.after(async (ctx) => {
  await Promise.all((ctx.nodes ?? []).map((n) => n.stop()));
  await ctx.db?.end();
  await ctx.redis?.destroy();
  ctx.pg?.stop();
  if (ctx.dir) rmSync(ctx.dir, { recursive: true, force: true });
});

pgDown('when PostgreSQL restarts, then health and logs name it meanwhile, the nodes reconnect, leadership is taken again, and every acknowledged message is stored', async (ctx) => {
  const [a, b] = ctx.nodes as [PlatformNode, PlatformNode];
  await givenFleet(a);
  const device = await until(() => b.mqttClient('fleet', 'fleet-password', { clientId: 'dev', reconnectPeriod: 300 }).catch(() => null), 5_000, 'node B to accept the set');
  device.on('error', () => undefined);
  const acked = new Set<number>();
  const send = (seq: number) => device.publishAsync(TOPIC, JSON.stringify({ seq }), { qos: 1 }).then(() => void acked.add(seq), () => undefined);
  for (let seq = 1; seq <= 10; seq++) await send(seq);

  // When PostgreSQL stops, with messages on their way.
  ctx.pg.stop();
  const inFlight = Array.from({ length: 10 }, (_, i) => send(11 + i));
  for (const node of ctx.nodes) {
    const h = await node.healthTurns(503, 15_000);
    assert.is(h.body.database, false, JSON.stringify(h.body));
  }
  await until(() => ctx.nodes.every((n) => n.logs.some((l) => String(l.msg).includes('waiting for PostgreSQL'))), 15_000, 'both nodes to log that they wait for PostgreSQL');
  let last: Record<string, any> = {};
  await until(async () => {
    last = (await a.health()).body;
    return (last.cluster?.waitingFor as string[] | undefined)?.some((w) => w.startsWith('PostgreSQL, for leadership'));
  }, 15_000, 'node A\'s health to name PostgreSQL as what it waits for').catch((err) => assert.unreachable(`${err.message}; last health: ${JSON.stringify(last)}`));

  // When it is back, then the nodes recover by themselves.
  ctx.pg = startPrivateCluster(ctx.dir, 'platform', { fast: true });
  for (const node of ctx.nodes) await node.healthTurns(200, 30_000);
  await until(async () => ((await a.leading()).length + (await b.leading()).length) === LEADER_PARTS.length, 15_000, 'every part led again');
  await Promise.all(inFlight);
  for (let seq = 21; seq <= 25; seq++) await send(seq);
  await until(() => acked.size === 25, 30_000, 'every message acknowledged');
  const stored = await until(async () => {
    const seqs = await storedSeqs(ctx.db).catch(() => []);
    return seqs.length >= 25 ? seqs : null;
  }, 10_000, 'the messages in the store');
  for (const seq of acked) assert.ok(stored.includes(seq), `acknowledged message ${seq} is stored`);
  assert.is(new Set(stored).size, 25);
  device.end(true);
});

pgDown('when a node is stopped while PostgreSQL is away, then it stops within seconds', async (ctx) => {
  const b = ctx.nodes[1]!;
  ctx.pg.stop();
  try {
    await b.healthTurns(503, 15_000);
    const stop = await stopWithin(b, 15_000);
    assert.ok(stop.stopped, `node B stopped on SIGTERM while PostgreSQL was away (still running after ${stop.after} ms)`);
  } finally {
    ctx.pg = startPrivateCluster(ctx.dir, 'platform', { fast: true });
  }
});

pgDown.run();
