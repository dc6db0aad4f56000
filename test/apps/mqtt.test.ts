import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { closed, connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';

const TOPIC = 'svc/generic/v2/apps/boiler';

interface Ctx {
  t: TestPlatform;
  p: Provider;
  device: string;
  app: { _id: string; secret: string };
}

const test = suite<Ctx>('client apps over MQTT');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'apps-provider', [TOPIC]);
  const c = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  await publish(c, TOPIC, { temperature: 20 });
  await c.endAsync();
  ctx.device = (await deviceOf(ctx.t, TOPIC))._id;
  const created = await ctx.t.call('POST', '/api/apps', { body: { name: 'Heating dashboard' } });
  assert.is(created.status, 201, created.text);
  ctx.app = created.body;
  const channel = await ctx.t.call('POST', '/api/channels', { body: { name: 'to the app', iotnode: ctx.device, mqtt: { type: 'app', recipient: ctx.app._id } } });
  assert.is(channel.status, 201, channel.text);
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

/** True when the broker refuses the login (CONNACK with an error code). */
const refusedLogin = (t: TestPlatform, username: string, password: string) =>
  connectMqtt(t, username, password).then(
    (c) => {
      c.end(true);
      return false;
    },
    (e: Error) => /Bad username or password|Not authorized/i.test(e.message),
  );

const messages = (client: MqttClient) => {
  const got: { topic: string; body: any }[] = [];
  client.on('message', (topic, payload) => got.push({ topic, body: JSON.parse(payload.toString()) }));
  return got;
};

test('given an app with a channel, when it logs in with its id and secret and subscribes to its output topics, then it receives the device\'s changes', async ({ t, p, device, app }) => {
  const client = await connectMqtt(t, app._id, app.secret, { clientId: 'dashboard-1' });
  const got = messages(client);
  const granted = await client.subscribeAsync(`svc/output/v2/${app._id}/#`, { qos: 1 });
  assert.is(granted[0]!.qos, 1);
  const provider = await connectMqtt(t, p.username, p.password);
  await publish(provider, TOPIC, { temperature: 21.5 });
  await provider.endAsync();
  const message = await eventually(async () => got.find((m) => m.body.diff?.temperature === 21.5), 10_000, 'the change on the app\'s output topic');
  assert.is(message.topic, `svc/output/v2/${app._id}/iotnode/${device}`);
  assert.is(message.body.iotnode._id, device);
  assert.is(message.body.event.type, 'DeviceReported');
  await client.endAsync();
});

test('given an app, when it subscribes to another id\'s topics, then SUBACK 0x80 and the connection stays; when it publishes, then the connection is closed', async ({ t, app, p }) => {
  const client = await connectMqtt(t, app._id, app.secret);
  // MQTT.js turns a failure return code (0x80) into a "Subscribe error".
  const refused = await client.subscribeAsync(`svc/output/v2/${p.setId}/#`, { qos: 1 }).then((g) => g[0]?.qos, (e: Error) => (/Subscribe error/.test(e.message) ? 128 : e.message));
  assert.is(refused, 128);
  assert.ok(client.connected);
  client.publish(TOPIC, JSON.stringify({ temperature: 99 }), { qos: 1 });
  assert.ok(await closed(client), 'the broker closed the connection');
  client.end(true);
  const logs = await eventually(async () => {
    const res = await t.call('GET', `/api/logs?resourceId=${app._id}`);
    return res.body.logs.length >= 2 ? res.body.logs : undefined;
  }, 10_000, 'the refusals logged on the app');
  const text = logs.map((l: { message: string }) => l.message).join('\n');
  assert.match(text, /subscription to svc\/output\/v2\/.* refused/);
  assert.match(text, /publish on .* refused: apps only consume/);
});

test('given an app, when it logs in with a wrong secret, then the login is refused and logged on the app', async ({ t, app }) => {
  assert.ok(await refusedLogin(t, app._id, 'not-the-secret'), 'refused');
  const logs = await eventually(async () => {
    const res = await t.call('GET', `/api/logs?resourceId=${app._id}&category=access&message=wrong%20secret`);
    return res.body.logs.length ? res.body.logs : undefined;
  }, 10_000, 'the refused login logged on the app');
  assert.is(logs[0].resourceType, 'app');
  assert.is(logs[0].type, 'warning');
});

test('given an app and a user choosing the same client id, then each keeps its own session', async ({ t, app }) => {
  const admin = (await t.call('GET', '/api/users?username=admin')).body[0].id;
  const asApp = await connectMqtt(t, app._id, app.secret, { clientId: 'same-id' });
  const asUser = await connectMqtt(t, admin, t.adminToken, { clientId: 'same-id' });
  await new Promise((r) => setTimeout(r, 200));
  assert.ok(asApp.connected && asUser.connected, 'neither took the other over');
  await asApp.endAsync();
  await asUser.endAsync();
});

test('given a connected app, when its secret is replaced, then the connection is closed, the old secret is refused and the new one works; deleted, it is closed again', async ({ t, app }) => {
  const client = await connectMqtt(t, app._id, app.secret);
  const rotated = await t.call('POST', `/api/apps/${app._id}/secret`);
  assert.is(rotated.status, 200);
  assert.ok(await closed(client), 'closed on the new secret');
  client.end(true);
  assert.ok(await refusedLogin(t, app._id, app.secret), 'the old secret is refused');
  const again = await connectMqtt(t, app._id, rotated.body.secret);
  assert.is((await t.call('DELETE', `/api/apps/${app._id}`)).status, 204);
  assert.ok(await closed(again), 'closed on deletion');
  again.end(true);
  assert.ok(await refusedLogin(t, app._id, rotated.body.secret), 'a deleted app cannot log in');
});

test.run();
