import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import mqtt, { type MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { closed, connectMqtt, deviceOf, eventually, projected, publish, type Provider } from '../ingest/support.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { assertNothingWritten, givenTenant } from './given.js';

/**
 * The attacks of two tenants on each other, each written as user B (Bob)
 * doing something to user A (Alice). Alice and Bob are ordinary users with
 * their own credentials sets, topics and devices; neither may hurt the other.
 */
interface Tenant {
  user: GivenUser;
  set: Provider;
  topic: string;
}

const attacks = suite<{ t: TestPlatform; alice: Tenant; bob: Tenant }>('Tenant isolation: Bob against Alice');

async function givenTenantWithSet(t: TestPlatform, name: string): Promise<Tenant> {
  const user = await givenTenant(t, name);
  const password = `${name}-mqtt-password`;
  const set = await t.call('POST', '/api/basic-credentials-sets', { token: user.token, body: { username: `${name}-set`, password } });
  assert.is(set.status, 201, set.text);
  const topic = `svc/generic/v2/${name}-plant`;
  const reserved = await t.call('POST', '/api/reserved-mqtt-topics', { token: user.token, body: { topic, basicCredentialsSetId: set.body._id } });
  assert.is(reserved.status, 201, reserved.text);
  return { user, set: { setId: set.body._id, username: `${name}-set`, password }, topic };
}

attacks.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.alice = await givenTenantWithSet(ctx.t, 'alice');
  ctx.bob = await givenTenantWithSet(ctx.t, 'bob');
});
attacks.after(async (ctx) => {
  await ctx.t.stop();
});

const logsOf = async (t: TestPlatform, resourceId: string, token?: string) =>
  (await t.call('GET', `/api/logs?resourceId=${resourceId}&limit=1000`, token ? { token } : {})).body.logs as { message: string; type: string; category: string }[];
const storedSeqs = async (t: TestPlatform, topic: string) =>
  (await sql<{ seq: number }>`SELECT (data->'payload'->>'seq')::int AS seq FROM es.events WHERE type = 'DeviceReported' AND data->>'topic' = ${topic}`.execute(t.platform.deps.db)).rows.map((r) => r.seq);

/** Bob's QoS 1 messages around Alice's poison message, all sent at once so they share ingest batches. */
async function poisonBatch(t: TestPlatform, alice: Tenant, bob: Tenant, poison: string, topic: string) {
  const a = await connectMqtt(t, alice.set.username, alice.set.password);
  const b = await connectMqtt(t, bob.set.username, bob.set.password);
  const before = new Set(await storedSeqs(t, topic));
  const first = Math.max(0, ...before) + 1;
  const seqs = Array.from({ length: 40 }, (_, i) => first + i);
  const acks = seqs.map((seq, i) => (i === 20 ? [publish(a, alice.topic, poison), publish(b, topic, { seq })] : [publish(b, topic, { seq })])).flat();
  // A publish whose connection the broker closed is never answered: past the deadline it counts as not acknowledged.
  const deadline = (p: Promise<unknown>) => Promise.race([p, new Promise((_, reject) => setTimeout(() => reject(new Error('no PUBACK within 15 s')), 15_000))]);
  const settled = await Promise.allSettled(acks.map(deadline));
  return { a, b, seqs, settled };
}

attacks('hole 1: when Alice publishes a 10,000-level payload amid Bob\'s burst, then every message of Bob is acknowledged and stored, and only Alice\'s message is refused, answered and logged', async ({ t, alice, bob }) => {
  const poison = '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000);
  const { a, b, seqs, settled } = await poisonBatch(t, alice, bob, poison, bob.topic);
  assert.ok(settled.every((s) => s.status === 'fulfilled'), `every publish acknowledged: ${settled.filter((s) => s.status === 'rejected').length} were not`);
  assert.ok(a.connected && b.connected, 'both connections stay open');
  const stored = await storedSeqs(t, bob.topic);
  for (const seq of seqs) assert.ok(stored.includes(seq), `Bob's message ${seq} is stored`);
  await eventually(async () => (await logsOf(t, alice.set.setId, alice.user.token)).some((l) => /not stored: the field a(\.a)+ is nested deeper than 32 levels/.test(l.message)));
  // Alice's next ordinary message goes through.
  await publish(a, alice.topic, { seq: 1 });
  assert.equal(await storedSeqs(t, alice.topic), [1]);
  await a.endAsync();
  await b.endAsync();
});

attacks('hole 1: when the database refuses one message of a shared batch, whatever the reason, then only that message is refused, and every other one is acknowledged and stored', async ({ t, alice, bob }) => {
  const db = t.platform.deps.db;
  // A real refusal by PostgreSQL that no check at the edge anticipates.
  await sql`CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.data::text LIKE '%poison-marker%' THEN RAISE EXCEPTION 'refused by a test trigger'; END IF; RETURN NEW; END $$`.execute(db);
  await sql`CREATE TRIGGER refuse_poison BEFORE INSERT ON es.events FOR EACH ROW EXECUTE FUNCTION refuse_poison()`.execute(db);
  try {
    const { a, b, seqs, settled } = await poisonBatch(t, alice, bob, JSON.stringify({ note: 'poison-marker' }), bob.topic);
    assert.ok(settled.every((s) => s.status === 'fulfilled'), 'every publish acknowledged');
    assert.ok(a.connected && b.connected, 'both connections stay open');
    const stored = await storedSeqs(t, bob.topic);
    for (const seq of seqs) assert.ok(stored.includes(seq), `Bob's message ${seq} is stored`);
    await eventually(async () => (await logsOf(t, alice.set.setId, alice.user.token)).some((l) => l.message.includes('not stored: the database refused its content')));
    const device = await deviceOf(t, alice.topic, alice.user.token);
    assert.is(device.note, undefined, 'the refused message left nothing behind');
    await a.endAsync();
    await b.endAsync();
  } finally {
    await sql`DROP TRIGGER refuse_poison ON es.events`.execute(db);
    await sql`DROP FUNCTION refuse_poison()`.execute(db);
  }
});

attacks('hole 2: when Bob reserves a topic below or above one of Alice\'s, then he is refused exactly as for a taken topic, and Alice keeps publishing below hers', async ({ t, alice, bob }) => {
  const reserve = (who: Tenant, topic: string) => t.call('POST', '/api/reserved-mqtt-topics', { token: who.user.token, body: { topic, basicCredentialsSetId: who.set.setId } });
  const taken = await reserve(bob, bob.topic);
  assert.is(taken.status, 409);
  const below = await reserve(bob, `${alice.topic}/sensor`);
  assert.is(below.status, 409, below.text);
  assert.is(below.text, taken.text, 'the same answer as a taken topic');
  assert.is((await reserve(alice, 'svc/generic/v2/site/alice-room')).status, 201);
  const above = await reserve(bob, 'svc/generic/v2/site');
  assert.is(above.status, 409, above.text);
  assert.is(above.text, taken.text);
  // Sets of one owner may nest: Alice's second set takes a sub-node of her own topic.
  const second = await t.call('POST', '/api/basic-credentials-sets', { token: alice.user.token, body: { username: 'alice-gateway', password: 'alice-gateway-pw' } });
  assert.is((await t.call('POST', '/api/reserved-mqtt-topics', { token: alice.user.token, body: { topic: `${alice.topic}/gw`, basicCredentialsSetId: second.body._id } })).status, 201);

  const a = await connectMqtt(t, alice.set.username, alice.set.password);
  await publish(a, alice.topic, { seq: 100 });
  await publish(a, `${alice.topic}/sensor`, { celsius: 21 });
  assert.ok(a.connected, 'Alice publishes below her topic');
  const device = await eventually(async () => {
    const d = await deviceOf(t, alice.topic, alice.user.token);
    return d.sensor ? d : undefined;
  });
  assert.equal(device.sensor, { celsius: 21 });
  await a.endAsync();
});

attacks('hole 3: when Bob creates a channel whose MQTT recipient is Alice or her credentials set, then 422, and nothing of Bob\'s reaches Alice\'s output topics', async ({ t, alice, bob }) => {
  const device = await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'bob device' } });
  const channel = (recipient: Record<string, string>) => t.call('POST', '/api/channels', { token: bob.user.token, body: { iotnode: device.body._id, mqtt: recipient } });
  const toUser = await channel({ type: 'keycloakUser', recipient: alice.user.id });
  assert.is(toUser.status, 422, toUser.text);
  assert.match(toUser.text, /^ERR - mqtt\.recipient must be your own user id/);
  const toSet = await channel({ type: 'basicCredentialsSet', recipient: alice.set.setId });
  const toNothing = await channel({ type: 'basicCredentialsSet', recipient: 'ffffffffffffffffffffffff' });
  assert.is(toSet.status, 422);
  assert.is(toSet.text, toNothing.text, 'an existing set of someone else answers as one that does not exist');
  const own = await channel({ type: 'keycloakUser', recipient: bob.user.id });
  assert.is(own.status, 201, 'Bob feeds his own output topic');

  const consumer = await connectMqtt(t, alice.user.id, alice.user.token);
  const received: string[] = [];
  consumer.on('message', (topic) => received.push(topic));
  await consumer.subscribeAsync(`svc/output/v2/${alice.user.id}/#`, { qos: 1 });
  const setConsumer = await connectMqtt(t, alice.set.username, alice.set.password);
  setConsumer.on('message', (topic) => received.push(topic));
  await setConsumer.subscribeAsync(`svc/output/v2/${alice.set.setId}/#`, { qos: 1 });
  const bobSees: string[] = [];
  const bobConsumer = await connectMqtt(t, bob.user.id, bob.user.token);
  bobConsumer.on('message', (topic) => bobSees.push(topic));
  await bobConsumer.subscribeAsync(`svc/output/v2/${bob.user.id}/#`, { qos: 1 });
  await t.call('PUT', `/api/iotnodes/${device.body._id}`, { token: bob.user.token, body: { description: 'spam' } });
  // Bob's own feed gets the change: by then Alice's would have too, had a channel to her existed.
  await eventually(async () => bobSees.length > 0, 10_000, "Bob's own output message");
  assert.equal(received, []);
  await Promise.all([consumer.endAsync(), setConsumer.endAsync(), bobConsumer.endAsync()]);
});

attacks('hole 4: when Bob connects with the client id Alice uses, then Alice stays connected and Bob gets a session of his own', async ({ t, alice, bob }) => {
  const a = await connectMqtt(t, alice.set.username, alice.set.password, { clientId: 'sensor-1' });
  const b = await connectMqtt(t, bob.set.username, bob.set.password, { clientId: 'sensor-1' });
  assert.not.ok(await closed(a, 1000), 'Alice is not thrown out');
  await publish(a, alice.topic, { seq: 200 });
  await publish(b, bob.topic, { seq: 200 });
  assert.ok(a.connected && b.connected);
  await a.endAsync();
  await b.endAsync();

  // A persistent session of Alice's stays hers: Bob with the same client id finds no session and none of her subscriptions.
  const persistent = { clientId: 'keeps-session', clean: false };
  const a2 = await connectMqtt(t, alice.set.username, alice.set.password, persistent);
  await a2.subscribeAsync(`svc/push/v1/${alice.set.setId}/#`, { qos: 1 });
  await a2.endAsync();
  const b2 = await new Promise<{ client: MqttClient; sessionPresent: boolean }>((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${t.mqttPort}`, { username: bob.set.username, password: bob.set.password, reconnectPeriod: 0, protocolVersion: 4, ...persistent });
    client.once('connect', (packet) => resolve({ client, sessionPresent: packet.sessionPresent }));
    client.once('error', reject);
  });
  assert.is(b2.sessionPresent, false, "Bob does not resume Alice's session");
  const a3 = await new Promise<{ client: MqttClient; sessionPresent: boolean }>((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${t.mqttPort}`, { username: alice.set.username, password: alice.set.password, reconnectPeriod: 0, protocolVersion: 4, ...persistent });
    client.once('connect', (packet) => resolve({ client, sessionPresent: packet.sessionPresent }));
    client.once('error', reject);
  });
  assert.is(a3.sessionPresent, true, 'Alice resumes her own session');
  await b2.client.endAsync();
  await a3.client.endAsync();
});

attacks('hole 5: when Bob claims Alice\'s claimed device by its guessed secret, then 404 and no right; the refusal and each claim are logged on the device; claims are rate-limited', async ({ t, alice, bob }) => {
  const topic = `${alice.topic}/meter`;
  assert.is((await t.call('POST', '/api/reserved-mqtt-topics', { token: alice.user.token, body: { topic, basicCredentialsSetId: alice.set.setId } })).status, 201);
  const a = await connectMqtt(t, alice.set.username, alice.set.password);
  await publish(a, topic, { kwh: 1 });
  await a.endAsync();
  const device = await deviceOf(t, topic, alice.user.token);
  const claim = (who: Tenant, secret: string) => t.call('POST', '/api/iotnodes/claim', { token: who.user.token, body: { secret } });
  assert.is((await claim(alice, topic)).status, 200);

  const stolen = await claim(bob, topic);
  const unknown = await claim(bob, 'svc/generic/v2/nobody-here');
  assert.is(stolen.status, 404, stolen.text);
  assert.is(stolen.text, unknown.text, 'a claimed device answers as an unknown secret');
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token: bob.user.token })).status, 404);
  await eventually(async () => {
    const logs = await logsOf(t, device._id, alice.user.token);
    return logs.some((l) => l.message === `Claimed by user alice (${alice.user.id})` && l.category === 'access') && logs.some((l) => l.message.startsWith(`A claim by user bob (${bob.user.id}) was refused`));
  }, 10_000, 'the claim and the refusal in the device log');

  // With Alice's consent (she shares the device), Bob's claim goes through.
  assert.is((await t.call('POST', '/api/access-rights', { token: alice.user.token, body: { resourceType: 'device', resourceId: device._id, subjectType: 'user', subjectId: bob.user.id, scope: ['read'] } })).status, 201);
  assert.is((await claim(bob, topic)).status, 200);

  let limited = null;
  for (let i = 0; i < 12 && !limited; i++) {
    const res = await claim(bob, `svc/generic/v2/guess-${i}`);
    if (res.status === 429) limited = res;
    else assert.is(res.status, 404);
  }
  assert.ok(limited, 'guessing is rate-limited');
  assert.match(limited!.text, /^ERR - too many claims/);
  assert.ok(Number(limited!.headers.get('retry-after')) >= 1);
});

attacks('hole 5: when a stranger makes the first claim of an unclaimed device, then it gets write and read on it, never admin', async ({ t, alice }) => {
  const carol = await givenTenant(t, 'carol');
  const topic = `${alice.topic}/fresh`;
  assert.is((await t.call('POST', '/api/reserved-mqtt-topics', { token: alice.user.token, body: { topic, basicCredentialsSetId: alice.set.setId } })).status, 201);
  const res = await t.call('POST', '/api/iotnodes/claim', { token: carol.token, body: { secret: topic } });
  assert.is(res.status, 200, res.text);
  assert.is((await t.call('PUT', `/api/iotnodes/${res.body._id}`, { token: carol.token, body: { description: 'installed' } })).status, 200);
  const share = await t.call('POST', '/api/access-rights', { token: carol.token, body: { resourceType: 'device', resourceId: res.body._id, subjectType: 'user', subjectId: carol.id, scope: ['admin'] } });
  assert.is(share.status, 403, 'no admin scope: the claimer cannot hand out rights');
});

attacks('hole 6: when Bob names Alice\'s credentials set in a reservation or a connector, then the answer is the one for a set that does not exist', async ({ t, alice, bob }) => {
  const reserve = (setId: string) => t.call('POST', '/api/reserved-mqtt-topics', { token: bob.user.token, body: { topic: 'svc/generic/v2/bob-probe', basicCredentialsSetId: setId } });
  const hers = await reserve(alice.set.setId);
  const none = await reserve('ffffffffffffffffffffffff');
  assert.is(hers.status, 422, hers.text);
  assert.equal([hers.status, hers.text], [none.status, none.text]);
  const connector = (setId: string) => t.call('POST', '/api/connectors', { token: bob.user.token, body: { name: 'probe', integration: 'Generic', basicCredentialsSetId: setId } });
  const herConnector = await connector(alice.set.setId);
  const noConnector = await connector('ffffffffffffffffffffffff');
  assert.is(herConnector.status, 422, herConnector.text);
  assert.equal([herConnector.status, herConnector.text], [noConnector.status, noConnector.text]);
  await projected(t);
});

attacks('when Bob binds his device to Alice\'s network-server connector, then 422, and Alice\'s uplinks keep reaching her own device', async ({ t, alice, bob }) => {
  const connector = await t.call('POST', '/api/connectors', { token: alice.user.token, body: { name: 'alice http', integration: 'GenericHttp' } });
  assert.is(connector.status, 201, connector.text);
  const eui = '70b3d57ed00aa11c';
  const hers = await t.call('POST', '/api/iotnodes', { token: alice.user.token, body: { name: 'alice meter', connector: connector.body._id, devEui: eui } });
  assert.is(hers.status, 201, hers.text);
  const bind = await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'bob squatter', connector: connector.body._id, devEui: eui } });
  assert.is(bind.status, 422, bind.text);
  assert.match(bind.text, /^ERR - connector must be a connector you may write$/);
  const own = await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'bob device' } });
  const rebind = await t.call('PUT', `/api/iotnodes/${own.body._id}`, { token: bob.user.token, body: { connector: { _id: connector.body._id }, devEui: eui } });
  assert.is(rebind.status, 422, rebind.text);
  // An id of no connector is stored as given, as the contract stores ids.
  assert.is((await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'unbound', connector: 'ffffffffffffffffffffffff' } })).status, 201);
  const res = await fetch(`${t.baseUrl}/api/integrations/http/${connector.body._id}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${connector.body.webhookSecret}` }, body: JSON.stringify({ devEui: eui, kwh: 7 }) });
  assert.is(res.status, 200, await res.text());
  const device = await eventually(async () => {
    const d = await t.call('GET', `/api/iotnodes/${hers.body._id}`, { token: alice.user.token });
    return d.body.kwh === 7 ? d.body : undefined;
  });
  assert.is(device._id, hers.body._id);
});

attacks('hole 7: when a viewer writes through a path in other letters\' case, then 404 with nothing stored; a known path with another method answers 405 with Allow', async ({ t, alice }) => {
  const viewer = await givenUser(t, 'casey', { attributes: { roles: ['viewerBasic'] } });
  const token = viewer.token;
  assert.is((await t.call('POST', '/api/dashboards', { token, body: { name: 'mine' } })).status, 403);
  const translator = { name: 'evil', version: '9.9.9', code: 'function translate(){return {}}', match: { deviceModelName: 'acme' }, spec: {} };
  for (const [method, path, body] of [
    ['POST', '/API/dashboards', { name: 'mine' }],
    ['POST', '/api/Dashboards', { name: 'mine' }],
    ['POST', '/api/IOTNODES', { name: 'mine' }],
    ['POST', '/api/TRANSLATORS', translator],
    ['POST', '/api/Organizations', { name: 'Finance' }],
    ['POST', '/Api/dashboards/', { name: 'mine' }],
  ] as [string, string, unknown][]) {
    const res = await t.call(method, path, { token, body });
    assert.is(res.status, 404, `${method} ${path}: ${res.status} ${res.text}`);
    await assertNothingWritten(t, res);
  }
  const device = (await t.call('GET', '/api/iotnodes', { token: alice.user.token })).body[0];
  if (device) {
    const del = await t.call('DELETE', `/api/IOTNODES/${device._id}`, { token: alice.user.token });
    assert.is(del.status, 404, del.text);
  }
  const wrong = await t.call('PATCH', '/api/users', { token, body: {} });
  assert.is(wrong.status, 405, wrong.text);
  assert.is(wrong.headers.get('allow'), 'GET, POST');
});

attacks('hole 8: when Bob makes Alice\'s reserved topic the secret of his device, before or after she reserves it, or after she released it, then he is refused and her data never reaches him', async ({ t, alice, bob }) => {
  // After: the topic is reserved to a set Bob may not write.
  const after = await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'trap', secret: alice.topic } });
  assert.is(after.status, 422, after.text);
  assert.is(after.text, 'ERR - secret is a reserved MQTT topic of a credentials set you may not write');
  await assertNothingWritten(t, after);
  const mine = (await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'mine' } })).body;
  const moved = await t.call('PUT', `/api/iotnodes/${mine._id}`, { token: bob.user.token, body: { secret: alice.topic } });
  assert.is(moved.status, 422, moved.text);

  // Before: Bob's device holds a topic nobody reserved yet; Alice's reservation of it is refused as a taken topic.
  const early = 'svc/generic/v2/alice-later';
  assert.is((await t.call('POST', '/api/iotnodes', { token: bob.user.token, body: { name: 'early trap', secret: early } })).status, 201);
  const reserve = (who: Tenant, topic: string) => t.call('POST', '/api/reserved-mqtt-topics', { token: who.user.token, body: { topic, basicCredentialsSetId: who.set.setId } });
  const refused = await reserve(alice, early);
  assert.is(refused.status, 409, refused.text);
  assert.is(refused.text, 'ERR - topic is already reserved');

  // Released: Alice's device keeps her old topic as its secret; Bob cannot reserve it and feed her device, nor she his.
  const released = 'svc/generic/v2/alice-old';
  const topic = await reserve(alice, released);
  assert.is(topic.status, 201, topic.text);
  const a = await connectMqtt(t, alice.set.username, alice.set.password);
  await publish(a, released, { seq: 1 });
  const hers = await deviceOf(t, released, alice.user.token);
  assert.is((await t.call('DELETE', `/api/reserved-mqtt-topics/${topic.body._id}`, { token: alice.user.token })).status, 204);
  assert.is((await reserve(bob, released)).status, 409);
  // Her own reservation of it again is hers to make: her data goes on to her device.
  assert.is((await reserve(alice, released)).status, 201);
  await publish(a, released, { seq: 2 });
  await eventually(async () => ((await deviceOf(t, released, alice.user.token)).seq === 2 ? true : undefined));
  assert.is((await deviceOf(t, released, alice.user.token))._id, hers._id);
  await a.endAsync();
});

attacks.run();
