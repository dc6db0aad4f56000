import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import mqtt, { type MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { closed, connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from './support.js';

/**
 * A user's MQTT connection (the user id as username, an access token as
 * password) lasts only as long as the token would be accepted over REST: it
 * is closed when the user is disabled or deleted, when their password is
 * changed or reset, and when the token expires.
 */
const TOPIC = 'svc/generic/v2/user-logins/meter';

const revoked = suite<{ t: TestPlatform; p: Provider; device: string }>('MQTT: a user\'s connections end with their tokens');

revoked.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'user-logins', [TOPIC]);
  const c = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  await publish(c, TOPIC, { power: 1 });
  await c.endAsync();
  ctx.device = (await deviceOf(ctx.t, TOPIC))._id;
});
revoked.after(async (ctx) => {
  await ctx.t.stop();
});

/** True when the broker refuses the login (CONNACK 5, not authorized). */
const refused = (t: TestPlatform, username: string, password: string) =>
  connectMqtt(t, username, password).then(
    (c) => {
      c.end(true);
      return false;
    },
    (e: Error) => /Not authorized/i.test(e.message),
  );

/** A user's connection over MQTT-over-WebSocket, as the control panel makes it. */
const connectWs = (t: TestPlatform, username: string, password: string): Promise<MqttClient> =>
  new Promise((resolve, reject) => {
    const client = mqtt.connect(`ws://127.0.0.1:${t.platform.httpPort}/mqtt`, { username, password, reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4 });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });

/** The user connected over TCP and over WebSocket, subscribed to their output topics. */
async function connected(t: TestPlatform, user: GivenUser): Promise<MqttClient[]> {
  const clients = [await connectMqtt(t, user.id, user.token), await connectWs(t, user.id, user.token)];
  for (const c of clients) await c.subscribeAsync(`svc/output/v2/${user.id}/#`, { qos: 1 });
  return clients;
}

const closedLog = (t: TestPlatform, userId: string, why: string) => t.logs.some((l) => l.msg === `MQTT connection of a user closed: ${why}` && l.userId === userId);

revoked('given a user receiving their output topics over MQTT, when an admin disables them, then their connections are closed and their token is refused at the next login', async ({ t, p, device }) => {
  const user = await givenUser(t, 'disabled-consumer');
  const channel = await t.call('POST', '/api/channels', { body: { name: 'to the consumer', iotnode: device, mqtt: { type: 'keycloakUser', recipient: user.id } } });
  assert.is(channel.status, 201, channel.text);
  const clients = await connected(t, user);
  const got: string[] = [];
  clients[0]!.on('message', (topic) => got.push(topic));
  const provider = await connectMqtt(t, p.username, p.password);
  await publish(provider, TOPIC, { power: 2 });
  await provider.endAsync();
  await eventually(async () => got.length > 0, 10_000, 'the change on the user\'s output topic');

  assert.is((await t.call('PATCH', `/api/users/${user.id}`, { body: { enabled: false } })).status, 200);

  for (const c of clients) assert.ok(await closed(c), 'the connection is closed');
  assert.ok(closedLog(t, user.id, 'the user was disabled'));
  assert.ok(await refused(t, user.id, user.token), 'a disabled user cannot log in again');
  for (const c of clients) c.end(true);
});

revoked('given a user connected over MQTT, when the user is deleted, then their connections are closed', async ({ t }) => {
  const user = await givenUser(t, 'deleted-consumer');
  const clients = await connected(t, user);
  assert.is((await t.call('DELETE', `/api/users/${user.id}`)).status, 204);
  for (const c of clients) assert.ok(await closed(c), 'the connection is closed');
  assert.ok(closedLog(t, user.id, 'the user was deleted'));
  assert.ok(await refused(t, user.id, user.token), 'a deleted user cannot log in');
  for (const c of clients) c.end(true);
});

revoked('given a user connected over MQTT, when they change their password, then their connections are closed, the old token is refused and the fresh one connects', async ({ t }) => {
  const user = await givenUser(t, 'changing-consumer');
  const clients = await connected(t, user);
  const res = await t.call('PUT', '/api/auth/password', { token: user.token, body: { currentPassword: user.password, newPassword: 'a-password-of-my-own' } });
  assert.is(res.status, 200, res.text);
  for (const c of clients) assert.ok(await closed(c), 'the connection is closed');
  assert.ok(closedLog(t, user.id, 'the user changed their password'));
  assert.ok(await refused(t, user.id, user.token), 'the token issued before the change is refused');
  const fresh = await connectMqtt(t, user.id, res.body.token);
  assert.ok(fresh.connected, 'the token the answer carries connects');
  await fresh.endAsync();
  for (const c of clients) c.end(true);
});

revoked('given a user connected over MQTT, when an admin or the admin of their organization unit resets their password, then their connections are closed', async ({ t }) => {
  const user = await givenUser(t, 'reset-consumer');
  const first = await connectMqtt(t, user.id, user.token);
  const reset = await t.call('POST', `/api/users/${user.id}/reset-password`);
  assert.is(reset.status, 200, reset.text);
  assert.ok(await closed(first), 'closed on the admin\'s reset');
  first.end(true);
  assert.ok(await refused(t, user.id, user.token), 'the token issued before the reset is refused');

  const unit = await t.call('POST', '/api/organizations', { body: { name: 'Reset Unit' } });
  assert.is(unit.status, 201, unit.text);
  assert.is((await t.call('PUT', `/api/organizations/${unit.body._id}/members/${user.id}`)).status, 201);
  const token = await t.login(user.username, reset.body.temporaryPassword);
  const second = await connectMqtt(t, user.id, token);
  const again = await t.call('POST', `/api/organizations/${unit.body._id}/members/${user.id}/reset-password`);
  assert.is(again.status, 200, again.text);
  assert.ok(await closed(second), 'closed on the unit\'s reset');
  second.end(true);
  assert.ok(closedLog(t, user.id, 'the user\'s password was reset'));
  assert.ok(await refused(t, user.id, token), 'the token issued before the unit\'s reset is refused');
});

revoked('given a user connected over MQTT, when another user is disabled or their own profile changes, then the connection stays', async ({ t }) => {
  const user = await givenUser(t, 'steady-consumer');
  const other = await givenUser(t, 'other-consumer');
  const client = await connectMqtt(t, user.id, user.token);
  assert.is((await t.call('PATCH', `/api/users/${other.id}`, { body: { enabled: false } })).status, 200);
  assert.is((await t.call('PATCH', `/api/users/${user.id}`, { body: { firstName: 'Steady', enabled: true } })).status, 200);
  assert.not.ok(await closed(client, 500), 'the connection stays');
  await client.endAsync();
});

revoked.run();

const expiring = suite<{ t: TestPlatform; user: GivenUser }>('MQTT: a user\'s connection ends when its token expires');

expiring.before(async (ctx) => {
  ctx.t = await startTestPlatform({ tokenTtlSeconds: 2 });
  ctx.user = await givenUser(ctx.t, 'short-lived');
});
expiring.after(async (ctx) => {
  await ctx.t.stop();
});

expiring('given TOKEN_TTL_SECONDS of 2, when a user\'s token expires, then the connection made with it is closed, and one the client closed before is not counted again', async ({ t, user }) => {
  const token = await t.login(user.username, user.password);
  const early = await connectMqtt(t, user.id, token);
  await early.endAsync();
  const client = await connectMqtt(t, user.id, token);
  assert.ok(await closed(client, 10_000), 'the connection is closed once the token expires');
  client.end(true);
  const expired = t.logs.filter((l) => l.msg === 'MQTT connection of a user closed: its access token expired' && l.userId === user.id);
  assert.is(expired.length, 1, 'only the connection still open is closed: the timer of the one closed before is cleared');
  assert.ok(
    await connectMqtt(t, user.id, token).then(
      (c) => {
        c.end(true);
        return false;
      },
      (e: Error) => /Not authorized/i.test(e.message),
    ),
    'the expired token is refused',
  );
});

expiring.run();
