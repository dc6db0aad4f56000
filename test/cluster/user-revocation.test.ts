import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { createTestDatabase } from '../support/cluster.js';
import { RedisServer } from '../support/redis.js';
import { PlatformNode, until } from '../support/nodes.js';

/**
 * Two platform processes on one database and one Redis. A user's MQTT
 * connections on both nodes are closed when a write answered by one node
 * disables the user or changes their password: every node follows the log
 * for itself and closes the connections it holds, as it does for an app's.
 */
interface Ctx {
  redis: RedisServer;
  nodes: PlatformNode[];
}

const cluster = suite<Ctx>('Cluster: a user\'s MQTT connections end on every node');

cluster.before(async (ctx) => {
  ctx.redis = await new RedisServer().start();
  const env = { DATABASE_URL: await createTestDatabase(), REDIS_URL: ctx.redis.url };
  // The first node creates the admin; the second starts once it has.
  const a = await new PlatformNode('node-a', env).start();
  const b = await new PlatformNode('node-b', env).start();
  ctx.nodes = [a, b];
});

cluster.after(async (ctx) => {
  await Promise.all((ctx.nodes ?? []).map((n) => n.stop()));
  await ctx.redis?.destroy();
});

/** Resolves with true once the broker closed the client's connection, false after `ms`. */
const closed = (client: MqttClient, ms = 10_000) =>
  new Promise<boolean>((resolve) => {
    if (!client.connected) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    client.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });

/** A user created through `node`, with a password of their own, logged in. */
async function givenUser(node: PlatformNode, username: string): Promise<{ id: string; password: string; token: string }> {
  const created = await node.call('POST', '/api/users', { username });
  assert.is(created.status, 201, created.text);
  const login = await node.call<{ token: string }>('POST', '/api/auth/local', { username, password: created.body.temporaryPassword }, null);
  assert.is(login.status, 200, login.text);
  return { id: created.body.id, password: created.body.temporaryPassword, token: login.body.token };
}

cluster('given a user connected to both nodes, when a write on one node disables them, then both connections are closed', async ({ nodes }) => {
  const [a, b] = nodes as [PlatformNode, PlatformNode];
  const user = await givenUser(a, 'cluster-disabled');
  const clients = [await a.mqttClient(user.id, user.token, { clientId: 'on-a' }), await b.mqttClient(user.id, user.token, { clientId: 'on-b' })];
  assert.is((await a.call('PATCH', `/api/users/${user.id}`, { enabled: false })).status, 200);
  for (const c of clients) assert.ok(await closed(c), 'closed');
  for (const c of clients) c.end(true);
  await until(() => b.logs.some((l) => l.msg === 'MQTT connection of a user closed: the user was disabled' && l.userId === user.id), 5_000, 'the close in node b\'s log');
  const again = await b.mqttClient(user.id, user.token).then((c) => (c.end(true), null), (e: Error) => e);
  assert.match(String(again?.message), /Not authorized/i, 'a disabled user cannot log in on the other node');
});

cluster('given a user connected to the other node, when they change their password on one node, then the connection is closed and the fresh token connects there', async ({ nodes }) => {
  const [a, b] = nodes as [PlatformNode, PlatformNode];
  const user = await givenUser(a, 'cluster-changer');
  const client = await b.mqttClient(user.id, user.token, { clientId: 'panel' });
  const res = await a.call<{ token: string }>('PUT', '/api/auth/password', { currentPassword: user.password, newPassword: 'cluster-changer-1' }, user.token);
  assert.is(res.status, 200, res.text);
  assert.ok(await closed(client), 'closed on the other node');
  client.end(true);
  const old = await b.mqttClient(user.id, user.token).then((c) => (c.end(true), null), (e: Error) => e);
  assert.match(String(old?.message), /Not authorized/i, 'the token issued before the change is refused on the other node');
  assert.is((await b.call('GET', `/api/users/${user.id}`, undefined, user.token)).status, 401, 'and over REST there');
  const fresh = await b.mqttClient(user.id, res.body.token, { clientId: 'panel' });
  assert.ok(fresh.connected, 'the fresh token connects');
  await fresh.endAsync();
});

cluster.run();
