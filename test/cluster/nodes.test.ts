import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import type { MqttClient } from 'mqtt';
import { createTestDatabase } from '../support/cluster.js';
import { RedisServer } from '../support/redis.js';
import { LEADER_PARTS, PlatformNode, until } from '../support/nodes.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';

/**
 * Three platform processes on one database and one Redis: one cluster. A
 * device publishes to one node and a consumer on another receives it; a REST
 * write on a third reads back on the first; the node that leads is killed
 * with SIGKILL, another takes over within 10 s, and nothing is lost, applied
 * twice or delivered twice (an HTTP channel's receiver and a network server's
 * queue count what reaches them). A rule on a minute's schedule runs once per
 * slot across the three nodes, before and after the take-over (the nodes'
 * clocks are moved up to the next minute after it, not waited for).
 */
const EUI = '70b3d57ed0000001';
const CS_TOKEN = 'chirpstack-api-token';
const ROOT = 'svc/generic/v2/cluster';
const PARTS = LEADER_PARTS;

interface Ctx {
  redis: RedisServer;
  db: pg.Pool;
  nodes: PlatformNode[];
  receiver: { url: string; bodies: Record<string, any>[]; server: Server };
  ns: ChirpStackStandIn;
}

async function startReceiver(): Promise<Ctx['receiver']> {
  const bodies: Record<string, any>[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      bodies.push(JSON.parse(text));
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, bodies, server };
}

const cluster = suite<Ctx>('Cluster: three nodes on one PostgreSQL and one Redis');

cluster.before(async (ctx) => {
  ctx.redis = await new RedisServer().start();
  const url = await createTestDatabase();
  ctx.db = new pg.Pool({ connectionString: url, max: 2 });
  ctx.receiver = await startReceiver();
  ctx.ns = await new ChirpStackStandIn(CS_TOKEN, new Set([EUI])).start();
  const env = { DATABASE_URL: url, REDIS_URL: ctx.redis.url };
  // The first node creates the admin; the others start together. Their clocks are moved together (the schedule's minute).
  const a = await new PlatformNode('node-a', env, { movableClock: true }).start();
  const [b, c] = await Promise.all([new PlatformNode('node-b', env, { movableClock: true }).start(), new PlatformNode('node-c', env, { movableClock: true }).start()]);
  ctx.nodes = [a, b, c];
});

cluster.after(async (ctx) => {
  await Promise.all((ctx.nodes ?? []).map((n) => n.stop()));
  await ctx.db?.end();
  await ctx.redis?.destroy();
  await new Promise((r) => ctx.receiver?.server.close(r));
  await ctx.ns?.stop();
});

/** Which node leads each part, as their health says; every part led by exactly one node. */
async function leaders(nodes: PlatformNode[]): Promise<Map<string, PlatformNode> | null> {
  const by = new Map<string, PlatformNode>();
  for (const n of nodes.filter((x) => x.alive)) {
    for (const part of await n.leading()) {
      if (by.has(part)) return null;
      by.set(part, n);
    }
  }
  return PARTS.every((p) => by.has(p)) ? by : null;
}

const seqsOf = (bodies: Record<string, any>[], device: string) => bodies.filter((b) => b.iotnode?._id === device && typeof b.diff?.seq === 'number').map((b) => b.diff.seq as number);

cluster('a write answered by one node is in every node\'s in-memory indexes before the next request: a device bound on node C takes a command on node B and an uplink through node A at once, a credentials set created on node C logs in on node A at once and publishes on a topic reserved on C at once, and a user disabled on node C is refused by node B at once', async (ctx) => {
  const [a, b, c] = ctx.nodes;
  await until(() => leaders(ctx.nodes), 15_000, 'every part led by exactly one node');
  // Given a ChirpStack connector, created on node C.
  const connector = await c.call('POST', '/api/connectors', { name: 'yard network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: CS_TOKEN } });
  assert.is(connector.status, 201, connector.text);
  ctx.ns.integration = { url: `${a.base}/api/integrations/chirpstack/${connector.body._id}`, headers: { Authorization: `Bearer ${connector.body.webhookSecret}` } };
  // When a device is bound to it on node C and a downlink for it is requested on node B as soon as C answered, then B knows the binding.
  for (let i = 0; i < 30; i++) {
    const eui = `70b3d57ed1${String(i).padStart(6, '0')}`;
    ctx.ns.devices.add(eui);
    const created = await c.call('POST', '/api/iotnodes', { name: `yard valve ${i}`, connector: connector.body._id, devEui: eui });
    assert.is(created.status, 201, created.text);
    const sent = await b.call('PUT', '/api/iotnodes/command', { command: 'loraAppServerQueueDownlink', iotnodeId: created.body._id, data: { confirmed: false, fPort: '10', data: '0a' } });
    assert.ok([200, 202].includes(sent.status), `device ${i}: ${sent.text}`);
    // And ChirpStack's webhook on node A stores its uplink, however soon it comes.
    const up = await ctx.ns.uplink(eui, 2, Buffer.from([i]));
    assert.is(up.status, 200, up.text);
    assert.is(JSON.parse(up.text).stored, 1, `device ${i}'s uplink on node A: ${up.text}`);
  }
  // When a credentials set is created on node C, then node A's broker takes a login with it at once.
  for (let i = 0; i < 12; i++) {
    const set = await c.call('POST', '/api/basic-credentials-sets', { username: `gate-${i}`, password: 'gate-password' });
    assert.is(set.status, 201, set.text);
    const client = await a.mqttClient(`gate-${i}`, 'gate-password', { clientId: `gate-${i}` }).catch((err: Error) => err);
    assert.ok(!(client instanceof Error), `credentials set ${i}: ${client}`);
    if (client instanceof Error) continue;
    // And when a topic is reserved to it on node C, a publish on it through node A at once is stored.
    const gate = `${ROOT}/gate-${i}`;
    assert.is((await c.call('POST', '/api/reserved-mqtt-topics', { topic: gate, basicCredentialsSetId: set.body._id })).status, 201);
    const acked = await Promise.race([client.publishAsync(gate, JSON.stringify({ open: i }), { qos: 1 }).then(() => true, () => false), new Promise<boolean>((r) => setTimeout(() => r(false), 5_000))]);
    assert.ok(acked, `the publish on ${gate} through node A was acknowledged`);
    const stored = await until(async () => (await ctx.db.query<{ open: number }>(`SELECT (doc->>'open')::int AS open FROM devices WHERE secret = $1`, [gate])).rows[0], 5_000, `the publish on ${gate} in the read models`);
    assert.is(stored.open, i);
    await client.endAsync();
  }
  // Given a user who has made a request on node B (so B has met them), when node C disables them, then B refuses their next request.
  for (let i = 0; i < 12; i++) {
    const user = await c.call('POST', '/api/users', { username: `shift-${i}`, attributes: { roles: ['viewerFull'] } });
    assert.is(user.status, 201, user.text);
    const login = await a.call('POST', '/api/auth/local', { username: `shift-${i}`, password: user.body.temporaryPassword }, null);
    assert.is(login.status, 200, login.text);
    const token = login.body.token as string;
    assert.is((await b.call('GET', `/api/users/${user.body.id}`, undefined, token)).status, 200);
    assert.is((await c.call('PATCH', `/api/users/${user.body.id}`, { enabled: false })).status, 200);
    const refused = await b.call('GET', `/api/users/${user.body.id}`, undefined, token);
    assert.is(refused.status, 401, `user ${i}: ${refused.text}`);
  }
});

cluster('when a device publishes to node A, a consumer on node B receives it, a REST write on node C reads back on node A; when the leader is killed, another node takes over within 10 s and nothing is lost, applied twice or delivered twice', async (ctx) => {
  const [a, b, c] = ctx.nodes;
  for (const n of ctx.nodes) {
    const h = await n.health();
    assert.is(h.status, 200, JSON.stringify(h.body));
    assert.is(h.body.cluster.node, n.name);
  }
  const led = await until(() => leaders(ctx.nodes), 15_000, 'every part led by exactly one node');
  assert.equal(new Set(led.keys()), new Set(PARTS));

  // Given a provider, created through node C.
  const set = await c.call('POST', '/api/basic-credentials-sets', { username: 'fleet', password: 'fleet-password' });
  assert.is(set.status, 201, set.text);
  const topic = `${ROOT}/dev1`;
  assert.is((await c.call('POST', '/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set.body._id })).status, 201);
  // Node A's broker takes a login with them as soon as C answered.
  const device = await a.mqttClient('fleet', 'fleet-password', { clientId: 'dev1' });
  const publish = (client: MqttClient, seq: number) => client.publishAsync(topic, JSON.stringify({ seq }), { qos: 1 });
  await publish(device, 0);
  const id = await until(async () => (await ctx.db.query<{ id: string }>('SELECT id FROM devices WHERE secret = $1', [topic])).rows[0]?.id, 10_000, 'the device');

  // A REST write on node C reads back on node A at once: a channel to the consumer, and one to an HTTP receiver.
  const mqttChannel = await c.call('POST', '/api/channels', { iotnode: id, mqtt: { type: 'basicCredentialsSet', recipient: set.body._id } });
  assert.is(mqttChannel.status, 201, mqttChannel.text);
  const readBack = await a.call('GET', `/api/channels/${mqttChannel.body._id}`);
  assert.is(readBack.status, 200, readBack.text);
  assert.is(readBack.body.iotnode, id);
  const httpChannel = await c.call('POST', '/api/channels', { iotnode: id, http: { url: ctx.receiver.url } });
  assert.is(httpChannel.status, 201, httpChannel.text);
  // A rule that posts to the receiver every minute: its clock must run on one node only.
  const ticking = await c.call('POST', '/api/rules-v2', {
    name: 'every minute',
    definition: {
      nodes: [
        { id: 'tick', type: 'trigger', config: { resourceType: 'schedule', cron: '* * * * *' } },
        { id: 'post', type: 'action', config: { action: 'channel', channelId: httpChannel.body._id, message: 'tick' } },
      ],
      edges: [{ from: 'tick', to: 'post' }],
    },
  });
  assert.is(ticking.status, 201, ticking.text);
  const ruleId = ticking.body._id as string;
  const renamed = await c.call('PUT', `/api/iotnodes/${id}`, { name: 'pump 7' });
  assert.is(renamed.status, 200, renamed.text);
  assert.is((await a.call('GET', `/api/iotnodes/${id}`)).body.name, 'pump 7', 'node A reads what node C wrote as soon as C answered');

  // A consumer on node B, with a persistent session.
  const got: number[] = [];
  const listen = (_t: string, payload: Buffer) => {
    const seq = JSON.parse(String(payload)).diff?.seq;
    if (typeof seq === 'number') got.push(seq);
  };
  const consumer = await b.mqttClient('fleet', 'fleet-password', { clientId: 'consumer', clean: false }, listen);
  await consumer.subscribeAsync(`svc/output/v2/${set.body._id}/#`, { qos: 1 });

  // When the device publishes to node A, then the consumer on node B and the HTTP receiver get every message once.
  for (let seq = 1; seq <= 20; seq++) await publish(device, seq);
  await until(() => got.length >= 20, 10_000, 'the consumer on node B to get 20 messages');
  assert.equal(got.slice(0, 20), Array.from({ length: 20 }, (_, i) => i + 1));
  await until(() => seqsOf(ctx.receiver.bodies, id).filter((s) => s > 0).length >= 20, 10_000, 'the receiver to get 20 messages');

  // A downlink through ChirpStack, requested on node B.
  const connector = await c.call('POST', '/api/connectors', { name: 'plant network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: CS_TOKEN } });
  assert.is(connector.status, 201, connector.text);
  const lora = await c.call('POST', '/api/iotnodes', { name: 'valve', connector: connector.body._id, devEui: EUI.toUpperCase() });
  assert.is(lora.status, 201, lora.text);
  const command = (node: PlatformNode, data: string) => node.call('PUT', '/api/iotnodes/command', { command: 'loraAppServerQueueDownlink', iotnodeId: lora.body._id, integrationName: 'ChirpStack', data: { confirmed: false, fPort: '10', data } });
  const first = await command(b, '01');
  assert.ok([200, 202].includes(first.status), first.text);
  await until(() => (ctx.ns.queues.get(EUI)?.length ?? 0) >= 1, 10_000, 'the first downlink in ChirpStack\'s queue');

  // Settled: every delivery done and its checkpoint saved.
  await new Promise((r) => setTimeout(r, 1500));

  // When the node that leads is killed (not within 3 s of a minute, when the rule's slot may be under way: a rule's channel message is at least once).
  const secondOfMinute = () => new Date(a.now()).getUTCSeconds();
  while (secondOfMinute() >= 56 || secondOfMinute() < 3) await new Promise((r) => setTimeout(r, 250));
  const leader = led.get('read-models')!;
  const survivors = ctx.nodes.filter((n) => n !== leader);
  // (The nodes' clocks are the real time until the schedule's check below moves them.)
  const killedAt = Date.now();
  await leader.kill();

  // Then, while the others take over, a device on a surviving node and a command on another go on.
  const device2 = await survivors[0]!.mqttClient('fleet', 'fleet-password', { clientId: 'dev1' });
  for (let seq = 21; seq <= 40; seq++) await publish(device2, seq);
  const second = await command(survivors[1]!, '02');
  assert.ok([200, 202].includes(second.status), second.text);
  const after = await until(() => leaders(survivors), 10_000, 'the surviving nodes to lead every part');
  const tookOver = Date.now() - killedAt;
  assert.ok(tookOver < 10_000, `took over in ${tookOver} ms`);
  for (const part of PARTS) assert.ok(after.get(part) !== leader);

  // The consumer gets the rest (reconnecting to a survivor with its session, if it was on the killed node).
  let reader = consumer;
  if (leader === b) {
    consumer.end(true);
    reader = await survivors[0]!.mqttClient('fleet', 'fleet-password', { clientId: 'consumer', clean: false }, listen);
  }
  await until(() => new Set(got).size >= 40, 15_000, 'the consumer to get all 40 messages');
  await until(() => new Set(seqsOf(ctx.receiver.bodies, id)).size >= 40, 15_000, 'the receiver to get all 40 messages');
  await until(() => (ctx.ns.queues.get(EUI)?.length ?? 0) >= 2, 15_000, 'the second downlink in ChirpStack\'s queue');
  await new Promise((r) => setTimeout(r, 1500));

  // Nothing lost, nothing applied twice, nothing delivered twice.
  const delivered = seqsOf(ctx.receiver.bodies, id);
  // (The first message, which created the device, came before the channels.)
  assert.equal([...delivered].sort((x, y) => x - y), Array.from({ length: 40 }, (_, i) => i + 1), 'each message reached the HTTP receiver exactly once');
  assert.equal([...new Set(got)].sort((x, y) => x - y), Array.from({ length: 40 }, (_, i) => i + 1), 'the consumer got every message');
  assert.equal(ctx.ns.queues.get(EUI)!.map((q) => Buffer.from(q.data, 'base64').toString('hex')), ['01', '02'], 'each downlink queued once');
  const reports = await ctx.db.query<{ n: string }>(`SELECT count(*) AS n FROM es.events WHERE stream_id = $1 AND type = 'DeviceReported'`, [`device-${id}`]);
  assert.is(Number(reports.rows[0]!.n), 41, 'each publish stored once');
  const history = await ctx.db.query<{ n: string }>(`SELECT count(*) AS n FROM device_history WHERE device_id = $1 AND fields ? 'seq'`, [id]);
  assert.is(Number(history.rows[0]!.n), 41, 'each report applied to the history once');
  const parked = await ctx.db.query('SELECT * FROM es.parked_events');
  assert.is(parked.rowCount, 0, JSON.stringify(parked.rows));
  const row = await survivors[1]!.call('GET', `/api/iotnodes/${id}`);
  assert.is(row.body.seq, 40);
  // The takeover is in the logs of the node that took over.
  const newLeader = after.get('read-models')!;
  assert.ok(newLeader.logs.some((l) => l.msg === 'cluster: leading' && l.part === 'read-models'));
  const epochs = await ctx.db.query<{ name: string; holder: string; epoch: string }>('SELECT name, holder, epoch::text FROM es.leases ORDER BY name');
  for (const lease of epochs.rows) {
    assert.is(lease.holder, after.get(lease.name)!.name);
    assert.ok(Number(lease.epoch) >= 2, `${lease.name} changed hands`);
  }

  // The schedule: one run per minute slot, none twice and none skipped across the take-over, each posted once.
  const runs = async () =>
    (await ctx.db.query<{ slot: string; run: string }>(`SELECT data->'trigger'->>'slot' AS slot, data->>'runId' AS run FROM es.events WHERE type = 'RuleRunStarted' AND data->>'ruleId' = $1 ORDER BY global_position`, [ruleId])).rows;
  // The next minute after the take-over comes without waiting for the wall clock's: unless a slot came since the
  // kill, the survivors' clocks are moved up to a second before it, and the node that keeps the schedule now takes it.
  if (!(await runs()).some((r) => Date.parse(r.slot) > killedAt)) {
    const now = survivors[0]!.now();
    const slot = Math.ceil((now + 1) / 60_000) * 60_000;
    if (slot - 1000 > now) await Promise.all(survivors.map((n) => n.advanceClock(slot - 1000 - now)));
  }
  await until(async () => (await runs()).some((r) => Date.parse(r.slot) > killedAt), 15_000, 'a scheduled run after the take-over');
  await until(async () => {
    const ids = new Set((await runs()).map((r) => r.run));
    return ctx.receiver.bodies.filter((b) => b.rule?._id === ruleId && ids.has(b.runId)).length >= ids.size;
  }, 15_000, 'every scheduled run posted');
  await new Promise((r) => setTimeout(r, 1000));
  const slots = (await runs()).map((r) => Date.parse(r.slot));
  assert.is(new Set(slots).size, slots.length, 'no slot ran twice');
  for (let i = 1; i < slots.length; i++) assert.is(slots[i]! - slots[i - 1]!, 60_000, 'no slot skipped');
  const posted = ctx.receiver.bodies.filter((b) => b.rule?._id === ruleId).map((b) => b.runId as string);
  assert.equal([...posted].sort(), (await runs()).map((r) => r.run).sort(), 'each scheduled run posted to the channel once');
  assert.ok(after.get('rules') !== leader);

  reader.end(true);
  device.end(true);
  device2.end(true);
});

cluster.run();
