import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import mqtt, { type MqttClient } from 'mqtt';
import { Redis } from 'ioredis';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { RedisServer } from '../support/redis.js';
import { TestClock } from '../support/clock.js';
import { scrape } from '../support/metrics.js';
import { RedisLastSeen } from '../../ingest/sessions.js';
import { deviceOf, eventually, givenProvider, type Provider } from './support.js';
import { logsOf } from '../translators/given.js';

/**
 * Persistent MQTT sessions (`clean: false`) are bounded: a queue keeps the
 * newest MQTT_SESSION_QUEUE_LIMIT messages, and a session whose client stays
 * away longer than MQTT_SESSION_EXPIRY_SECONDS ends. The same scenarios run on
 * the single process (sessions in memory) and on a node of a cluster
 * (sessions in Redis). The platform clock is the test's: time away is moved,
 * not waited for; the broker sweeps every 500 ms of real time.
 */
const TOKEN = 'metrics-token-for-the-sessions-test';
const LIMIT = 5;
const EXPIRY_S = 2;
const TOPIC = 'svc/generic/v2/sessions/dev';

type Ctx = { t: TestPlatform; p: Provider; clock: TestClock; device: MqttClient; redis?: RedisServer; keys?: Redis };

/** A consumer of the set's output topics whose message handler is attached before it connects, as docs/mqtt.md says. */
async function consumer(t: TestPlatform, p: Provider, clientId: string, clean: boolean): Promise<{ client: MqttClient; sessionPresent: boolean; got: number[] }> {
  const got: number[] = [];
  const client = mqtt.connect(`mqtt://127.0.0.1:${t.mqttPort}`, { username: p.username, password: p.password, clientId, clean, reconnectPeriod: 0, protocolVersion: 4 });
  client.on('message', (_topic, payload) => {
    const n = JSON.parse(String(payload)).diff?.n;
    if (typeof n === 'number') got.push(n);
  });
  const sessionPresent = await new Promise<boolean>((resolve, reject) => {
    client.once('connect', (ack) => resolve(ack.sessionPresent));
    client.once('error', reject);
  });
  return { client, sessionPresent, got };
}

const end = (client: MqttClient) => new Promise<void>((resolve) => client.end(false, {}, () => resolve()));

/** Publishes reports `from`..`to` and waits until a clean consumer has their output: by then the broker has queued them for every session. */
async function report(ctx: Ctx, from: number, to: number): Promise<void> {
  const watch = await consumer(ctx.t, ctx.p, `watch-${from}`, true);
  await watch.client.subscribeAsync(`svc/output/v2/${ctx.p.setId}/#`, { qos: 1 });
  const sent: Promise<unknown>[] = [];
  for (let n = from; n <= to; n++) sent.push(ctx.device.publishAsync(TOPIC, JSON.stringify({ n }), { qos: 1 }));
  await Promise.all(sent);
  await eventually(async () => watch.got.includes(to), 10_000, `the output of report ${to}`);
  await end(watch.client);
}

/** A persistent consumer that subscribes, then leaves. */
async function leaves(ctx: Ctx, clientId: string): Promise<void> {
  const c = await consumer(ctx.t, ctx.p, clientId, false);
  await c.client.subscribeAsync(`svc/output/v2/${ctx.p.setId}/#`, { qos: 1 });
  await end(c.client);
}

/** Whether the broker has had time to sweep: a sweep runs every 500 ms (a quarter of the expiry). */
const swept = () => new Promise((r) => setTimeout(r, 1200));

function scenarios(name: string, start: (ctx: Ctx) => Promise<void>, stop: (ctx: Ctx) => Promise<void>, redisChecks: boolean) {
  const s = suite<Ctx>(`Persistent MQTT sessions (${name}): queue limit and expiry`);
  s.before(async (ctx) => {
    ctx.clock = new TestClock();
    ctx.clock.set('2026-03-01T00:00:00Z');
    await start(ctx);
    ctx.p = await givenProvider(ctx.t, 'sessions', [TOPIC]);
    ctx.device = await mqtt.connectAsync(`mqtt://127.0.0.1:${ctx.t.mqttPort}`, { username: ctx.p.username, password: ctx.p.password, clientId: 'dev', reconnectPeriod: 0, protocolVersion: 4 });
    // The device's changes go out on the set's output topics.
    await ctx.device.publishAsync(TOPIC, JSON.stringify({ n: 0 }), { qos: 1 });
    const device = await deviceOf(ctx.t, TOPIC);
    const channel = await ctx.t.call('POST', '/api/channels', { body: { iotnode: device._id, mqtt: { type: 'basicCredentialsSet', recipient: ctx.p.setId } } });
    assert.is(channel.status, 201, channel.text);
  });
  s.after(async (ctx) => {
    ctx.device?.end(true);
    await stop(ctx);
  });

  s('given a consumer away, when more messages come than its queue keeps, then it gets the newest, in order, and the drops are counted', async (ctx) => {
    await leaves(ctx, 'feed');
    await report(ctx, 1, 8);
    if (redisChecks) {
      assert.is(await ctx.keys!.llen(`outgoing:${encodeURIComponent(`${ctx.p.setId}/feed`)}`), LIMIT, 'the queue in Redis is trimmed');
      // Each dropped message was queued for this session only: released with its entry.
      const stored = (await ctx.keys!.keys('packet:*')).filter((k) => !k.endsWith(':offlineCount'));
      assert.is(stored.length, LIMIT, `stored messages: ${stored.length}`);
    }
    const back = await consumer(ctx.t, ctx.p, 'feed', false);
    assert.ok(back.sessionPresent);
    await eventually(async () => back.got.length >= LIMIT, 10_000, 'the queued messages');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(back.got, [4, 5, 6, 7, 8]);
    const metrics = await scrape(ctx.t.baseUrl, TOKEN);
    assert.is(metrics.value('platform_mqtt_session_messages_dropped_total'), 3);
    // Summed up at the next sweep, in the process log,
    await eventually(async () => ctx.t.logs.some((l) => String(l.msg).includes('queues full while their consumers are away')), 5_000, 'a full queue logged');
    // and in the set's log, where its owner reads it.
    const told = await eventually(async () => {
      const entries = (await logsOf(ctx.t, ctx.p.setId)).filter((l) => l.message.startsWith('MQTT session feed: '));
      const sum = entries.reduce((n, l) => n + Number(/^MQTT session feed: (\d+) queued message\(s\) dropped while its client was away; a session keeps the newest 5$/.exec(l.message)?.[1] ?? NaN), 0);
      return sum === 3 ? entries : undefined;
    }, 5_000, 'the entries in the set\'s log, 3 dropped in all');
    assert.equal([told[0]!.type, told[0]!.category], ['warning', 'system']);
    await end(back.client);
  });

  s('given a consumer away for less than the expiry, when it comes back, then its session and queue are there', async (ctx) => {
    await leaves(ctx, 'short');
    ctx.clock.advance(EXPIRY_S * 1000 - 1);
    await swept();
    await report(ctx, 9, 9);
    const back = await consumer(ctx.t, ctx.p, 'short', false);
    assert.ok(back.sessionPresent);
    await eventually(async () => back.got.includes(9), 10_000, 'the message queued while away');
    await end(back.client);
  });

  s('given a consumer away longer than the expiry, then its session ends: queue, subscriptions and all; its next connection starts afresh', async (ctx) => {
    await leaves(ctx, 'gone');
    await report(ctx, 10, 10);
    ctx.clock.advance(EXPIRY_S * 1000 + 1);
    await eventually(async () => ctx.t.logs.some((l) => l.session === `${ctx.p.setId}/gone` && String(l.msg).includes('session ended')), 5_000, 'the session to end');
    if (redisChecks) {
      assert.is(await ctx.keys!.exists(`outgoing:${encodeURIComponent(`${ctx.p.setId}/gone`)}`), 0, 'no queue left in Redis');
      assert.is(await ctx.keys!.exists(`client:${encodeURIComponent(`${ctx.p.setId}/gone`)}`), 0, 'no subscriptions left in Redis');
      assert.is(await ctx.keys!.zscore(RedisLastSeen.KEY, `${ctx.p.setId}/gone`), null);
    }
    // Published after the end: nobody is subscribed for it any more.
    await report(ctx, 11, 11);
    const back = await consumer(ctx.t, ctx.p, 'gone', false);
    assert.is(back.sessionPresent, false);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(back.got, [], 'nothing queued');
    const metrics = await scrape(ctx.t.baseUrl, TOKEN);
    assert.ok((metrics.value('platform_mqtt_sessions_expired_total') ?? 0) >= 1);
    await eventually(async () => (await logsOf(ctx.t, ctx.p.setId)).some((l) => l.message.startsWith(`MQTT session gone ended: its client was away longer than ${EXPIRY_S} s`)), 5_000, 'the entry in the set\'s log');
    await end(back.client);
  });

  s('given a consumer connected for longer than the expiry, then its session stays', async (ctx) => {
    const c = await consumer(ctx.t, ctx.p, 'stays', false);
    await c.client.subscribeAsync(`svc/output/v2/${ctx.p.setId}/#`, { qos: 1 });
    await swept();
    ctx.clock.advance(EXPIRY_S * 1000 * 10);
    await swept();
    await report(ctx, 12, 12);
    await eventually(async () => c.got.includes(12), 10_000, 'live delivery');
    await end(c.client);
    const back = await consumer(ctx.t, ctx.p, 'stays', false);
    assert.ok(back.sessionPresent, 'the session outlived the expiry while connected');
    await end(back.client);
  });

  s('given a consumer connected, when a burst brings more messages than its queue keeps, then it receives every one and stays connected', async (ctx) => {
    const c = await consumer(ctx.t, ctx.p, 'live', false);
    await c.client.subscribeAsync(`svc/output/v2/${ctx.p.setId}/#`, { qos: 1 });
    // The output reactor hands the broker the burst in a few batches: more unacknowledged messages than the limit at once.
    await report(ctx, 100, 160);
    await eventually(async () => c.got.includes(160), 10_000, 'the whole burst');
    assert.equal(c.got, Array.from({ length: 61 }, (_, i) => 100 + i));
    assert.ok(c.client.connected, 'still connected');
    await end(c.client);
  });

  s('given a session ended by a clean connection, then it is no longer timed', async (ctx) => {
    await leaves(ctx, 'retired');
    const clean = await consumer(ctx.t, ctx.p, 'retired', true);
    await end(clean.client);
    ctx.clock.advance(EXPIRY_S * 1000 + 1);
    await swept();
    assert.not.ok(ctx.t.logs.some((l) => l.session === `${ctx.p.setId}/retired`), 'nothing left to end');
  });

  return s;
}

scenarios(
  'single process, in memory',
  async (ctx) => {
    ctx.t = await startTestPlatform({ metricsToken: TOKEN, mqttSessionQueueLimit: LIMIT, mqttSessionExpirySeconds: EXPIRY_S }, { clock: ctx.clock.now });
  },
  async (ctx) => {
    await ctx.t?.stop();
  },
  false,
).run();

scenarios(
  'a node of a cluster, in Redis',
  async (ctx) => {
    ctx.redis = await new RedisServer().start();
    ctx.keys = new Redis(ctx.redis.url);
    ctx.t = await startTestPlatform({ metricsToken: TOKEN, mqttSessionQueueLimit: LIMIT, mqttSessionExpirySeconds: EXPIRY_S, redisUrl: ctx.redis.url }, { clock: ctx.clock.now });
  },
  async (ctx) => {
    ctx.keys?.disconnect();
    await ctx.t?.stop();
    await ctx.redis?.destroy();
  },
  true,
).run();

const backlog = suite<Ctx>('Persistent MQTT sessions (a node of a cluster, in Redis): a long queue');
backlog.before(async (ctx) => {
  ctx.clock = new TestClock();
  ctx.redis = await new RedisServer().start();
  ctx.t = await startTestPlatform({ metricsToken: TOKEN, redisUrl: ctx.redis.url });
  ctx.p = await givenProvider(ctx.t, 'sessions', [TOPIC]);
  ctx.device = await mqtt.connectAsync(`mqtt://127.0.0.1:${ctx.t.mqttPort}`, { username: ctx.p.username, password: ctx.p.password, clientId: 'dev', reconnectPeriod: 0, protocolVersion: 4 });
  await ctx.device.publishAsync(TOPIC, JSON.stringify({ n: 0 }), { qos: 1 });
  const device = await deviceOf(ctx.t, TOPIC);
  assert.is((await ctx.t.call('POST', '/api/channels', { body: { iotnode: device._id, mqtt: { type: 'basicCredentialsSet', recipient: ctx.p.setId } } })).status, 201);
});
backlog.after(async (ctx) => {
  ctx.device?.end(true);
  await ctx.t?.stop();
  await ctx.redis?.destroy();
});

backlog('given a consumer away while 1,500 messages are queued, when it comes back, then it gets all of them at once, in order', async (ctx) => {
  // aedes-persistence-redis sends a returning session the first 1,001 of its queue unless told otherwise.
  await leaves(ctx, 'backlog');
  await report(ctx, 1, 1500);
  const back = await consumer(ctx.t, ctx.p, 'backlog', false);
  assert.ok(back.sessionPresent);
  await eventually(async () => back.got.length >= 1500, 20_000, 'the whole queue');
  assert.equal(back.got, Array.from({ length: 1500 }, (_, i) => i + 1));
  await end(back.client);
});

backlog.run();
