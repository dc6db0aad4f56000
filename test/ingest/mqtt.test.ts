import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect as connectTcp } from 'node:net';
import { sql } from 'kysely';
import type { MqttClient } from 'mqtt';
import { issueToken } from '../../domain/access/tokens.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { ROOTS_NOTE, reservedTopicStream } from '../../domain/topics/reservedTopic.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { RawPublisher } from '../support/rawMqtt.js';
import { givenUser } from '../users/given.js';
import { closed, connectMqtt, deviceOf, eventually, givenProvider, projected, publish, type Provider } from './support.js';
import { MAX_SUBSCRIPTIONS } from '../../ingest/broker.js';

const ROOT = 'svc/generic/v2/plant';
const GATEWAY = `${ROOT}/gw`;
const NODE = `${GATEWAY}/node-1`;

const broker = suite<{ t: TestPlatform; p: Provider; other: Provider }>('MQTT broker: publish rules and authorization');

broker.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'plant', [GATEWAY, NODE, `${ROOT}/lonely`, `${ROOT}/bad`, `${ROOT}/claimed`, `${ROOT}/early`]);
  ctx.other = await givenProvider(ctx.t, 'other', [`${ROOT}/others`]);
});
broker.after(async (ctx) => {
  await ctx.t.stop();
});

const logsOf = async (t: TestPlatform, resourceId: string) => {
  const res = await t.call('GET', `/api/logs?resourceId=${resourceId}&limit=1000`);
  return res.body.logs as { message: string; type: string; category: string }[];
};
const countSecret = async (t: TestPlatform, topic: string) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM devices WHERE secret = ${topic}`.execute(t.platform.deps.db)).rows[0]!.n;

broker('rule 1 and 5: when a provider publishes on a reserved topic, then a device named "MQTT - <topic>" with that secret gets the payload as fields', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, GATEWAY, { temperature: 21.5, on: true });
  const device = await deviceOf(t, GATEWAY);
  assert.is(device.name, `MQTT - ${GATEWAY}`);
  assert.is(device.secret, GATEWAY);
  assert.is(device.temperature, 21.5);
  assert.is(device.on, true);
  assert.ok(device.reportedAt);
  await c.endAsync();
});

broker('rule 1: when the reserved topic publishes again, then the same device is updated, not duplicated', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, GATEWAY, { temperature: 22 });
  await publish(c, GATEWAY, { humidity: 40 });
  const device = await eventually(async () => {
    const d = await deviceOf(t, GATEWAY);
    return d.humidity === 40 ? d : undefined;
  });
  assert.is(device.temperature, 22);
  assert.is(device.on, true);
  assert.is(await countSecret(t, GATEWAY), 1);
  await c.endAsync();
});

broker('rule 2: when a sub-topic that is not reserved publishes, then the payload is stored under the sub-topic name', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${GATEWAY}/stats`, { uptime: 12, cpu: 0.5 });
  const device = await eventually(async () => {
    const d = await deviceOf(t, GATEWAY);
    return d.stats ? d : undefined;
  });
  assert.equal(device.stats, { uptime: 12, cpu: 0.5 });
  assert.is(await countSecret(t, `${GATEWAY}/stats`), 0);
  await c.endAsync();
});

broker('rule 3: when a deeper unreserved topic publishes, then the nearest reserved ancestor nests it along the remaining path', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${GATEWAY}/devices/3`, { level: 7 });
  await publish(c, `${GATEWAY}/devices/4`, { level: 8 });
  const device = await eventually(async () => {
    const d = await deviceOf(t, GATEWAY);
    return d.devices?.['4'] ? d : undefined;
  });
  assert.equal(device.devices, { '3': { level: 7 }, '4': { level: 8 } });
  await c.endAsync();
});

broker('rule 2: when a sub-topic publishes before its reserved topic has a device, then no device is created and a log entry says why', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/lonely/stats`, { x: 1 });
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message.includes(`${ROOT}/lonely/stats`)));
  assert.is(await countSecret(t, `${ROOT}/lonely`), 0);
  await c.endAsync();
});

broker('rule 4: when a reserved sub-topic publishes, then it is its own device and the parent is untouched', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, NODE, { battery: 3.1 });
  const node = await deviceOf(t, NODE);
  assert.is(node.battery, 3.1);
  assert.is(node.name, `MQTT - ${NODE}`);
  const parent = await deviceOf(t, GATEWAY);
  assert.is(parent['node-1'], undefined);
  await c.endAsync();
});

broker('when a device is created from MQTT, then the credentials set creator can read it and another user cannot', async ({ t, p }) => {
  const stranger = await givenUser(t, 'stranger');
  const device = await deviceOf(t, NODE);
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token: stranger.token })).status, 404);
  assert.ok(p.setId);
});

broker('claim: when a user claims a device by its secret, then the user gets access; before data flows the device is created', async ({ t, p }) => {
  const owner = await givenUser(t, 'owner', { attributes: { roles: ['installer'] } });
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/claimed`, { v: 1 });
  const device = await deviceOf(t, `${ROOT}/claimed`);
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token: owner.token })).status, 404);
  const claim = await t.call('POST', '/api/iotnodes/claim', { token: owner.token, body: { secret: `${ROOT}/claimed` } });
  assert.is(claim.status, 200, claim.text);
  assert.is(claim.body._id, device._id);
  assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token: owner.token })).status, 200);
  assert.is((await t.call('PUT', `/api/iotnodes/${device._id}`, { token: owner.token, body: { description: 'mine' } })).status, 200);

  const early = await t.call('POST', '/api/iotnodes/claim', { token: owner.token, body: { secret: `${ROOT}/early` } });
  assert.is(early.status, 200, early.text);
  assert.is(early.body.name, `MQTT - ${ROOT}/early`);
  await publish(c, `${ROOT}/early`, { v: 2 });
  const later = await eventually(async () => {
    const r = await t.call('GET', `/api/iotnodes/${early.body._id}`, { token: owner.token });
    return r.body.v === 2 ? r.body : undefined;
  });
  assert.is(later._id, early.body._id);
  assert.is(await countSecret(t, `${ROOT}/early`), 1);

  const unknown = await t.call('POST', '/api/iotnodes/claim', { token: owner.token, body: { secret: 'svc/generic/v2/nothing-here' } });
  assert.is(unknown.status, 404);
  await c.endAsync();
});

broker('claim: when the device was created over REST or its credentials set is gone, then claiming it by its secret answers 404 and grants nothing', async ({ t, p }) => {
  const claimer = await givenUser(t, 'claimer', { attributes: { roles: ['installer'] } });
  // the second secret is also a reserved topic: the REST device still belongs to its creator alone
  const secrets = ['svc/generic/v2/made-over-rest', `${ROOT}/made-over-rest`];
  for (const secret of secrets) {
    const made = await t.call('POST', '/api/iotnodes', { body: { name: 'REST device', secret } });
    assert.is(made.status, 201, made.text);
  }
  const reserved = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: `${ROOT}/made-over-rest`, basicCredentialsSetId: p.setId } });
  assert.is(reserved.status, 201, reserved.text);

  const gone = await givenProvider(t, 'gone', [`${ROOT}/gone`]);
  const c = await connectMqtt(t, gone.username, gone.password);
  await publish(c, `${ROOT}/gone`, { v: 1 });
  await deviceOf(t, `${ROOT}/gone`);
  await c.endAsync();
  assert.is((await t.call('DELETE', `/api/basic-credentials-sets/${gone.setId}`)).status, 204);

  for (const secret of [...secrets, `${ROOT}/gone`]) {
    const device = await deviceOf(t, secret);
    const claim = await t.call('POST', '/api/iotnodes/claim', { token: claimer.token, body: { secret } });
    assert.is(claim.status, 404, `${secret}: ${claim.text}`);
    assert.is((await t.call('GET', `/api/iotnodes/${device._id}`, { token: claimer.token })).status, 404, secret);
    assert.is((await t.call('PUT', `/api/iotnodes/${device._id}`, { token: claimer.token, body: { description: 'mine' } })).status, 404, secret);
  }
});

broker('when the password is wrong or the username unknown, then the login is refused and a wrong password is logged on the set', async ({ t, p }) => {
  const wrong = await connectMqtt(t, p.username, 'not-the-password').then(() => null, (e: Error) => e);
  assert.ok(wrong, 'wrong password refused');
  const unknown = await connectMqtt(t, 'nobody', 'x').then(() => null, (e: Error) => e);
  assert.ok(unknown, 'unknown user refused');
  const anonymous = await connectMqtt(t, '', '').then(() => null, (e: Error) => e);
  assert.ok(anonymous, 'anonymous refused');
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message.includes('wrong password') && l.category === 'access'));
});

broker('when a client id is longer than 256 bytes, then the login is refused as an identifier rejected (MQTT 3.1.1 too); one of 256 bytes connects and publishes', async ({ t, p }) => {
  const long = await connectMqtt(t, p.username, p.password, { clientId: 'é'.repeat(129), reconnectPeriod: 0 }).then(() => null, (e: Error & { code?: number }) => e);
  assert.ok(long, 'a 258-byte client id is refused');
  assert.is(long!.code, 2, long!.message);
  assert.ok(t.logs.some((l) => l.msg === 'MQTT login refused: client id longer than 256 bytes'));
  const client = await connectMqtt(t, p.username, p.password, { clientId: 'é'.repeat(128) });
  try {
    await publish(client, `${ROOT}/lonely`, { longIdPublish: 1 });
    await eventually(async () => (await deviceOf(t, `${ROOT}/lonely`)).longIdPublish === 1, 10_000, 'the report from the 256-byte client id');
  } finally {
    await client.endAsync();
  }
});

broker('when a message and its re-send (DUP) arrive in one read, before the first is stored, then it is stored once and both are acknowledged', async ({ t, p }) => {
  const raw = new RawPublisher(t.mqttPort);
  await raw.connect(p.username, p.password);
  try {
    const payload = JSON.stringify({ inOneRead: 41 });
    raw.publishAll([
      { messageId: 77, topic: `${ROOT}/lonely`, payload },
      { messageId: 77, topic: `${ROOT}/lonely`, payload, dup: true },
    ]);
    await eventually(async () => raw.acks >= 2, 10_000, 'both acknowledged');
    await projected(t);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeviceReported' AND data->'payload'->>'inOneRead' = '41'`.execute(t.platform.deps.db);
    assert.is(rows[0]!.n, 1);
  } finally {
    raw.close();
  }
});

broker('when a device publishes at QoS 2, then the connection is closed, nothing is stored, and the set\'s log says QoS 2 is not supported', async ({ t, p }) => {
  const client = await connectMqtt(t, p.username, p.password, { reconnectPeriod: 0 });
  const gone = closed(client);
  client.publish(`${ROOT}/lonely`, JSON.stringify({ qos2: 1 }), { qos: 2 });
  assert.ok(await gone, 'the connection is closed');
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message === `MQTT publish on ${ROOT}/lonely refused: QoS 2 is not supported; publish at QoS 0 or 1`), 10_000, 'the refusal in the set\'s log');
  await projected(t);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeviceReported' AND data->'payload' ? 'qos2'`.execute(t.platform.deps.db);
  assert.is(rows[0]!.n, 0);
  client.end(true);
});

broker('when a user logs in with a valid token, then it connects; with an expired or foreign token it is refused', async ({ t }) => {
  const user = await givenUser(t, 'consumer');
  const c = await connectMqtt(t, user.id, user.token);
  await c.endAsync();
  const secret = t.platform.deps.jwtSecret;
  const expired = issueToken(secret, user.id, -10);
  assert.ok(await connectMqtt(t, user.id, expired).then(() => null, (e: Error) => e), 'expired token refused');
  const admin = (await t.call('GET', '/api/users')).body.find((u: { username: string }) => u.username === 'admin');
  assert.ok(await connectMqtt(t, user.id, issueToken(secret, admin.id, 60)).then(() => null, (e: Error) => e), 'token of another user refused');
  // No resource owner can be told: both refusals go to the process log.
  const refusals = t.logs.filter((l) => l.msg === 'MQTT login refused: invalid or expired access token' && l.userId === user.id);
  assert.is(refusals.length, 2);
});

broker('when a user\'s password has changed, then a token issued before is refused at login and the token the change answered connects', async ({ t }) => {
  const user = await givenUser(t, 'changed-consumer');
  const res = await t.call('PUT', '/api/auth/password', { token: user.token, body: { currentPassword: user.password, newPassword: 'changed-consumer-1' } });
  assert.is(res.status, 200, res.text);
  const old = await connectMqtt(t, user.id, user.token).then((c) => (c.end(true), null), (e: Error) => e);
  assert.match(String(old?.message), /Not authorized/i, 'the token issued before the change is refused');
  assert.ok(t.logs.some((l) => l.msg === 'MQTT login refused: access token issued before the user\'s latest password change or reset' && l.userId === user.id));
  const fresh = await connectMqtt(t, user.id, res.body.token);
  await fresh.endAsync();
});

broker('when a provider publishes on a topic not reserved to it, then the connection is closed, nothing is stored, and it is logged', async ({ t, p, other }) => {
  for (const topic of [`${ROOT}/others`, 'svc/generic/v2/unreserved', `${ROOT}`, '$SYS/x', `${GATEWAY}//x`, `${GATEWAY}/`]) {
    const c = await connectMqtt(t, p.username, p.password);
    c.publish(topic, JSON.stringify({ evil: true }), { qos: 1 });
    assert.ok(await closed(c), `closed after ${topic}`);
    c.end(true);
  }
  assert.is(await countSecret(t, `${ROOT}/others`), 0);
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message.includes(`${ROOT}/others`) && l.message.includes('refused')));
  // Log entries are written after the refusal; wait until all three are readable.
  const expected = [`MQTT publish on ${GATEWAY}//x refused: empty topic level`, `MQTT publish on ${GATEWAY}/ refused: empty topic level`, 'MQTT publish on $SYS/x refused: $SYS/ topics are reserved to the broker'];
  await eventually(async () => {
    const logged = (await logsOf(t, p.setId)).map((l) => l.message);
    return expected.every((m) => logged.includes(m));
  }, 5000, 'the empty-level and $SYS refusals in the set\'s log');
  // The broker keeps serving.
  const c = await connectMqtt(t, other.username, other.password);
  await publish(c, `${ROOT}/others`, { fine: 1 });
  assert.is((await deviceOf(t, `${ROOT}/others`)).fine, 1);
  await c.endAsync();
});

broker('when a user publishes at all, then the connection is closed', async ({ t }) => {
  const user = await givenUser(t, 'publisher');
  const c = await connectMqtt(t, user.id, user.token);
  c.publish(GATEWAY, '{}', { qos: 1 });
  assert.ok(await closed(c));
  c.end(true);
});

broker('when a payload is not a JSON object or too large, then it is acknowledged, not stored, logged, and the connection stays', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  const topic = `${ROOT}/bad`;
  for (const payload of ['not json', '[1,2]', '42', 'null', Buffer.alloc(300 * 1024, 'a')]) await publish(c, topic, payload);
  assert.ok(c.connected);
  await publish(c, topic, { ok: true });
  const device = await deviceOf(t, topic);
  assert.equal(Object.keys(device).filter((k) => !['_id', 'name', 'secret', 'rabbitRouting', 'createdAt', 'updatedAt', 'reportedAt'].includes(k)), ['ok']);
  const messages = (await eventually(async () => {
    const l = await logsOf(t, p.setId);
    return l.filter((x) => x.message.includes(topic)).length >= 3 ? l : undefined;
  })).map((l) => l.message);
  assert.ok(messages.some((m) => m.includes('not JSON')));
  assert.ok(messages.some((m) => m.includes('not a JSON object')));
  assert.ok(messages.some((m) => m.includes('larger than 262144')));
  await c.endAsync();
});

broker('when a payload holds what the database cannot store, then only that device misses it, and the other messages of the batch are stored', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  const gateway = await deviceOf(t, GATEWAY);
  // Sent together, so they share ingest batches.
  await Promise.all([
    publish(c, `${ROOT}/bad`, '{"nul":"a\\u0000b"}'),
    publish(c, NODE, '{"surrogate":"\\ud800"}'),
    publish(c, GATEWAY, { together: 1 }),
  ]);
  assert.ok(c.connected);
  assert.is((await eventually(async () => {
    const d = await deviceOf(t, GATEWAY);
    return d.together === 1 ? d : undefined;
  }))._id, gateway._id);
  // Both are refused alone at the broker, answered, and logged on the credentials set with the field and why.
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message.includes('the field nul must not contain NUL characters')));
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => l.message.includes('the field surrogate must not contain lone UTF-16 surrogates')));
  // Every message was acknowledged: once the read models hold all that is stored, the refused report is surely absent.
  await projected(t);
  assert.is((await deviceOf(t, NODE)).surrogate, undefined);
  await c.endAsync();
});

broker('when a topic or a field name carries NUL or a lone surrogate, then the refusal is still logged, quoting it escaped', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  const errorsBefore = t.logs.filter((l) => Number(l.level) >= 50).length;
  await publish(c, `${ROOT}/bad/\u0000x`, { a: 1 });
  await publish(c, `${ROOT}/bad`, '{"k\\ud800":1}');
  assert.ok(c.connected);
  const messages = (await eventually(async () => {
    const l = (await logsOf(t, p.setId)).map((x) => x.message);
    return l.some((m) => m.includes('\\u0000x')) && l.some((m) => m.includes('k\\ud800')) ? l : undefined;
  }, 10_000, 'both refusals in the log')).filter((m) => m.includes('\\u0000x') || m.includes('k\\ud800'));
  assert.ok(messages.some((m) => m === `MQTT message on ${ROOT}/bad/\\u0000x not stored: the topic must not contain NUL characters`), messages.join('\n'));
  assert.ok(messages.some((m) => m.startsWith(`MQTT message on ${ROOT}/bad not stored: the field k\\ud800 is a field name that must not contain lone UTF-16 surrogates`)), messages.join('\n'));
  assert.is(t.logs.filter((l) => Number(l.level) >= 50).length, errorsBefore, 'no log write failed');
  await c.endAsync();
});

broker('given a connection holding 1,000 subscriptions, when it subscribes to one more topic, then SUBACK 0x80; a topic it holds is granted again, and after an unsubscribe a new one is', async ({ t }) => {
  const user = await givenUser(t, 'wide-subscriber');
  const u = await connectMqtt(t, user.id, user.token);
  const topic = (i: number) => `svc/output/v2/${user.id}/iotnode/d${i}`;
  // MQTT.js turns a failure return code (0x80) into a "Subscribe error".
  const granted = (topics: string[]) => u.subscribeAsync(topics, { qos: 1 }).then((g) => g.map((x) => x.qos), (e: Error) => (/Subscribe error/.test(e.message) ? [128] : e.message));
  const first = await granted(Array.from({ length: MAX_SUBSCRIPTIONS }, (_, i) => topic(i)));
  assert.ok(Array.isArray(first) && first.length === MAX_SUBSCRIPTIONS && first.every((q) => q === 1), String(first));
  assert.equal(await granted([topic(MAX_SUBSCRIPTIONS)]), [128]);
  assert.equal(await granted([topic(7)]), [1]);
  await u.unsubscribeAsync(topic(0));
  assert.equal(await granted([topic(MAX_SUBSCRIPTIONS)]), [1]);
  assert.ok(u.connected);
  await u.endAsync();
});

broker('when subscribing outside the own topics, then SUBACK 0x80; own output and push topics are granted', async ({ t, p }) => {
  const user = await givenUser(t, 'subscriber');
  const u = await connectMqtt(t, user.id, user.token);
  // MQTT.js turns a failure return code (0x80) into a "Subscribe error".
  const granted = (c: typeof u, topic: string) =>
    c.subscribeAsync(topic, { qos: 1 }).then((g) => g[0]?.qos, (e: Error) => (/Subscribe error/.test(e.message) ? 128 : e.message));
  assert.is(await granted(u, `svc/output/v2/${user.id}/#`), 1);
  assert.is(await granted(u, `svc/output/v2/${p.setId}/#`), 128);
  assert.is(await granted(u, 'svc/output/v2/+/iotnode/x'), 128);
  assert.is(await granted(u, '#'), 128);
  assert.is(await granted(u, '$SYS/#'), 128);
  assert.is(await granted(u, `svc/push/v1/${p.setId}/#`), 128);
  assert.ok(u.connected);
  await u.endAsync();
  const c = await connectMqtt(t, p.username, p.password);
  assert.is(await granted(c, `svc/push/v1/${p.setId}/#`), 1);
  assert.is(await granted(c, `svc/output/v2/${p.setId}/iotnode/abc`), 1);
  assert.is(await granted(c, GATEWAY), 128);
  assert.is(await granted(c, `svc/push/v1/${p.setId}`), 128);
  assert.ok(c.connected);
  const logged = (await eventually(async () => {
    const l = (await logsOf(t, p.setId)).filter((x) => x.message.startsWith('MQTT subscription to '));
    return l.length >= 2 ? l : undefined;
  })).map((l) => l.message);
  assert.ok(logged.includes(`MQTT subscription to ${GATEWAY} refused: not a topic of this credentials set`), logged.join('\n'));
  assert.ok(logged.includes(`MQTT subscription to svc/push/v1/${p.setId} refused: not a topic of this credentials set`));
  await c.endAsync();
});

broker('when reports carry platform fields, then those are ignored and the device keeps its identity', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, NODE, { _id: 'x', secret: 'svc/generic/v2/hijack', name: 'renamed', rabbitRouting: {}, lnglat: { type: 'Point', coordinates: [3, 51] }, ok: 2 });
  const node = await eventually(async () => {
    const d = await deviceOf(t, NODE);
    return d.ok === 2 ? d : undefined;
  });
  assert.is(node.secret, NODE);
  assert.is(node.name, `MQTT - ${NODE}`);
  assert.equal(node.lnglat, { type: 'Point', coordinates: [3, 51] });
  await c.endAsync();
});

broker('when reports on sub-topics would write platform fields or a bad lnglat, then they are ignored and logged on the device, the device keeps its identity, and the read models keep up', async ({ t, p }) => {
  const c = await connectMqtt(t, p.username, p.password);
  const before = await deviceOf(t, NODE);
  for (const [level, payload] of [
    ['secret', { x: 1 }],
    ['name', { x: 1 }],
    ['createdAt', { x: 1 }],
    ['translatorPreferences', { name: 'x' }],
    ['lnglat', { type: 'Feature' }],
    ['lnglat/coordinates', { x: 1 }],
  ] as const) {
    await publish(c, `${NODE}/${level}`, payload);
  }
  await publish(c, `${NODE}/lnglat`, { type: 'Point', coordinates: [4, 52] });
  await publish(c, NODE, { subtopicProbe: 1 });
  const node = await eventually(async () => {
    const d = await deviceOf(t, NODE);
    return d.subtopicProbe === 1 ? d : undefined;
  });
  assert.is(node.secret, NODE);
  assert.is(node.name, before.name);
  assert.is(node.createdAt, before.createdAt);
  assert.is(node.translatorPreferences, before.translatorPreferences);
  assert.equal(node.lnglat, { type: 'Point', coordinates: [4, 52] });
  const logged = await eventually(async () => {
    const l = (await logsOf(t, node._id)).map((x) => x.message);
    return l.some((m) => m.startsWith('Reported fields lnglat were ignored')) ? l : undefined;
  });
  for (const field of ['secret', 'name', 'createdAt', 'translatorPreferences']) assert.ok(logged.some((m) => m.startsWith(`Reported fields ${field} were ignored`)), logged.join('\n'));
  // A REST write still answers once its change is visible: the read models did not stall on anything stored.
  assert.is((await t.call('PUT', `/api/iotnodes/${node._id}`, { body: { description: 'after' } })).status, 200);
  await c.endAsync();
});

broker('given sub-topic reports on platform fields stored before they were refused, when the read models apply them, then they change nothing and the projections keep up', async ({ t }) => {
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'legacy reports' } });
  const at = new Date().toISOString();
  const report = (path: string[], payload: Record<string, unknown>) =>
    toNewEvent({ type: 'DeviceReported', data: { id: device.body._id, topic: `legacy/${path.join('/')}`, path, payload, reportedAt: at } }, { actor: 'credentials:legacy', correlationId: 'legacy', now: at });
  await t.platform.deps.store.append(`device-${device.body._id}`, [report(['lnglat'], { type: 'Feature' }), report(['createdAt'], { x: 1 }), report(['secret'], { x: 1 }), report(['level'], { v: 3 })], 'any');
  await projected(t);
  const read = await t.call('GET', `/api/iotnodes/${device.body._id}`);
  assert.is(read.status, 200);
  assert.equal(read.body.level, { v: 3 });
  assert.is(read.body.lnglat, undefined);
  assert.is(read.body.createdAt, device.body.createdAt);
  assert.is((await t.call('PUT', `/api/iotnodes/${device.body._id}`, { body: { description: 'after' } })).status, 200);
});

broker('when MQTT runs over WebSocket at /mqtt, then a provider can publish through it', async ({ t, p }) => {
  const mqtt = (await import('mqtt')).default;
  const c = await new Promise<import('mqtt').MqttClient>((resolve, reject) => {
    const client = mqtt.connect(`ws://127.0.0.1:${t.platform.httpPort}/mqtt`, { username: p.username, password: p.password, reconnectPeriod: 0, protocolVersion: 4 });
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
  await publish(c, GATEWAY, { viaWebSocket: true });
  await eventually(async () => (await deviceOf(t, GATEWAY)).viaWebSocket === true);
  await c.endAsync();
});

/** Everything a client receives, in order. */
const inbox = (c: MqttClient) => {
  const got: { topic: string; text: string }[] = [];
  c.on('message', (topic, payload) => got.push({ topic, text: payload.toString() }));
  return got;
};

broker('when a credentials set reserves below another set\'s push topic, then 422 naming its own branch; its own branch is accepted', async ({ t }) => {
  const a = await givenProvider(t, 'push-a', []);
  const b = await givenProvider(t, 'push-b', []);
  const stolen = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: `svc/push/v1/${b.setId}/cmd`, basicCredentialsSetId: a.setId } });
  assert.is(stolen.status, 422);
  assert.is(stolen.text, `ERR - topic below svc/push/v1 must start with the id of its own basic credentials set: svc/push/v1/${a.setId}/…; ${ROOTS_NOTE}`);
  const bare = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: `svc/push/v1/${b.setId}`, basicCredentialsSetId: a.setId } });
  assert.is(bare.status, 422);
  const own = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: `svc/push/v1/${a.setId}/up`, basicCredentialsSetId: a.setId } });
  assert.is(own.status, 201, own.text);
  assert.not.ok((await t.call('GET', '/api/reserved-mqtt-topics')).body.some((r: { topic: string }) => r.topic.startsWith(`svc/push/v1/${b.setId}`)));
});

broker('when a device publishes on a topic another client subscribed to, then only the ingest gets it; the platform\'s downlinks are delivered', async ({ t }) => {
  const a = await givenProvider(t, 'fwd-a', []);
  const b = await givenProvider(t, 'fwd-b', []);
  // given a reservation of B's push branch by A, stored before reservations there were limited to the own branch
  const admin = (await t.call('GET', '/api/users')).body.find((u: { username: string }) => u.username === 'admin');
  const legacy = newResourceId();
  const at = new Date().toISOString();
  const stored = await t.platform.deps.store.append(
    reservedTopicStream(legacy),
    [toNewEvent({ type: 'ReservedTopicCreated', data: { id: legacy, topic: `svc/push/v1/${b.setId}/legacy`, basicCredentialsSetId: a.setId, createdBy: admin.id, at } }, { actor: `user:${admin.id}`, correlationId: 'legacy', now: at })],
    'no_stream',
  );
  await t.platform.deps.projections.waitFor(stored.position, 5000);
  const own = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: `svc/push/v1/${a.setId}/up`, basicCredentialsSetId: a.setId } });
  assert.is(own.status, 201, own.text);
  const connector = await t.call('POST', '/api/connectors', { body: { name: 'downlinks of B', basicCredentialsSetId: b.setId, integration: 'Generic' } });
  assert.is(connector.status, 201, connector.text);

  const bSub = await connectMqtt(t, b.username, b.password);
  await bSub.subscribeAsync(`svc/push/v1/${b.setId}/#`, { qos: 1 });
  const toB = inbox(bSub);
  const aSub = await connectMqtt(t, a.username, a.password);
  await aSub.subscribeAsync(`svc/push/v1/${a.setId}/#`, { qos: 1 });
  const toA = inbox(aSub);

  // when A publishes into B's push branch and into its own, both acknowledged and stored
  const aPub = await connectMqtt(t, a.username, a.password);
  await publish(aPub, `svc/push/v1/${b.setId}/legacy`, { reboot: true });
  await publish(aPub, `svc/push/v1/${a.setId}/up`, { mine: 1 });
  assert.is((await deviceOf(t, `svc/push/v1/${b.setId}/legacy`)).reboot, true);
  assert.is((await deviceOf(t, `svc/push/v1/${a.setId}/up`)).mine, 1);

  // then B receives only the platform's downlink, and A's own subscription nothing
  const sent = await t.call('PUT', '/api/connectors/command', { body: { command: 'sendDownlink', integrationName: 'Generic', connectorId: connector.body._id, data: { mqttTopic: 'legacy', message: '{"interval":60}' } } });
  assert.is(sent.status, 202, sent.text);
  await eventually(async () => toB.length > 0);
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(toB, [{ topic: `svc/push/v1/${b.setId}/legacy`, text: '{"interval":60}' }]);
  assert.equal(toA, []);
  await Promise.all([bSub.endAsync(), aSub.endAsync(), aPub.endAsync()]);
});

broker('when a publish topic holds a wildcard, then the connection is closed, it is logged on the set, and the broker keeps serving', async ({ t }) => {
  const p = await givenProvider(t, 'wild', [`${ROOT}/wild`]);
  // MQTT.js sends a publish topic as given; aedes refuses wildcards before the authorization hook.
  for (const topic of [`${ROOT}/wild/+/x`, '#']) {
    const c = await connectMqtt(t, p.username, p.password);
    c.publish(topic, '{"a":1}', { qos: 1 });
    assert.ok(await closed(c), `closed after ${topic}`);
    c.end(true);
  }
  const logged = (await eventually(async () => {
    const l = (await logsOf(t, p.setId)).filter((x) => x.message.includes('wildcard'));
    return l.length >= 2 ? l : undefined;
  })).map((l) => l.message);
  assert.ok(logged.some((m) => m.startsWith('MQTT connection closed: a publish topic contains the wildcard +')), logged.join('\n'));
  assert.ok(logged.some((m) => m.startsWith('MQTT connection closed: a publish topic contains the wildcard #')), logged.join('\n'));
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/wild`, { after: 1 });
  assert.is((await deviceOf(t, `${ROOT}/wild`)).after, 1);
  await c.endAsync();
});

broker('when a packet is over the hard limit, then the connection is closed at its header and logged, and the broker keeps serving', async ({ t }) => {
  const p = await givenProvider(t, 'huge', [`${ROOT}/huge`]);
  const big = Buffer.alloc(2 * 1024 * 1024, 'a');

  // a 2 MiB publish over TCP
  const c = await connectMqtt(t, p.username, p.password);
  c.publish(`${ROOT}/huge`, big, { qos: 1 });
  assert.ok(await closed(c), 'closed after a 2 MiB publish');
  c.end(true);

  // only the fixed header of a PUBLISH declaring 256 MiB: refused without waiting for the body
  const h = await connectMqtt(t, p.username, p.password);
  (h as unknown as { stream: NodeJS.WritableStream }).stream.write(Buffer.from([0x32, 0xff, 0xff, 0xff, 0x7f]));
  assert.ok(await closed(h), 'closed after a header declaring 256 MiB');
  h.end(true);

  // a 2 MiB publish over WebSocket
  const mqtt = (await import('mqtt')).default;
  const w = await new Promise<MqttClient>((resolve, reject) => {
    const client = mqtt.connect(`ws://127.0.0.1:${t.platform.httpPort}/mqtt`, { username: p.username, password: p.password, reconnectPeriod: 0, protocolVersion: 4 });
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
  w.on('error', () => {});
  w.publish(`${ROOT}/huge`, big, { qos: 1 });
  assert.ok(await closed(w), 'closed after a 2 MiB publish over WebSocket');
  w.end(true);

  const logged = (await eventually(async () => {
    const l = (await logsOf(t, p.setId)).filter((x) => x.message.includes('larger than the limit') || x.message.includes('WebSocket message is larger'));
    return l.length >= 3 ? l : undefined;
  })).map((l) => l.message);
  assert.ok(logged.some((m) => m.includes('an MQTT packet of 268435455 bytes is larger than the limit of 327680 bytes')), logged.join('\n'));

  // before a login, the process log tells
  const raw = connectTcp(t.mqttPort, '127.0.0.1');
  await new Promise((resolve) => raw.once('connect', resolve));
  raw.write(Buffer.from([0x10, 0xff, 0xff, 0xff, 0x7f]));
  await new Promise((resolve) => raw.once('close', resolve));
  await eventually(async () => t.logs.some((l) => l.msg === 'MQTT connection closed: packet too large' && l.session === undefined));

  // nothing was stored, and the broker keeps serving
  assert.is(await countSecret(t, `${ROOT}/huge`), 0);
  const ok = await connectMqtt(t, p.username, p.password);
  await publish(ok, `${ROOT}/huge`, { small: 1 });
  assert.is((await deviceOf(t, `${ROOT}/huge`)).small, 1);
  await ok.endAsync();
});

broker.run();
