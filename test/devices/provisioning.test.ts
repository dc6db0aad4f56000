import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { connectMqtt } from '../ingest/support.js';
import { loadOpenApi } from '../../api/openapi.js';
import { ROOTS_NOTE } from '../../domain/topics/reservedTopic.js';

const prov = suite<{ t: TestPlatform; setId: string }>('Credentials sets, reserved topics and connectors');

prov.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const res = await ctx.t.call('POST', '/api/basic-credentials-sets', { body: { username: 'provider', password: 'provider-secret' } });
  ctx.setId = res.body._id;
});
prov.after(async (ctx) => {
  await ctx.t.stop();
});

prov('when a credentials set is created, then only _id and username come back and the password is stored hashed', async ({ t }) => {
  const res = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'gateway-7', password: 'clear-text-secret' } });
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ['_id', 'username']);
  const row = await t.platform.deps.db.selectFrom('credentials_sets').selectAll().where('id', '=', res.body._id).executeTakeFirstOrThrow();
  assert.match(row.password_hash, /^scrypt\$/);
  const list = await t.call('GET', '/api/basic-credentials-sets');
  assert.ok(list.text.includes('gateway-7'));
  assert.not.ok(list.text.includes('clear-text-secret'));
  assert.not.ok(list.text.includes('scrypt'));
});

prov('when the username has the shape of a UUID, then 422', async ({ t }) => {
  const res = await t.call('POST', '/api/basic-credentials-sets', { body: { username: '0f8fad5b-d9cb-469f-a165-70867728950e', password: 'whatever-1' } });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - username /);
});

prov('when a username is taken, then 409', async ({ t }) => {
  const res = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'provider', password: 'another-one' } });
  assert.is(res.status, 409);
});

prov('when a topic is reserved, then {_id, topic} comes back and it lists, reads and deletes', async ({ t, setId }) => {
  const res = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/generic/v2/site-1', basicCredentialsSetId: setId } });
  assert.is(res.status, 201, res.text);
  assert.equal(Object.keys(res.body).sort(), ['_id', 'topic']);
  assert.is((await t.call('GET', `/api/reserved-mqtt-topics/${res.body._id}`)).body.basicCredentialsSetId, setId);
  assert.ok((await t.call('GET', '/api/reserved-mqtt-topics')).body.some((x: { _id: string }) => x._id === res.body._id));
  assert.is((await t.call('DELETE', `/api/reserved-mqtt-topics/${res.body._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/reserved-mqtt-topics/${res.body._id}`)).status, 404);
});

prov('when a topic breaks a rule, then 422 and the message names the allowed roots', async ({ t, setId }) => {
  for (const topic of ['/svc/generic/v2/x', 'svc/other/v2/x', 'svc/generic/v2', 'svc/generic/v2/', 'svc/generic/v2/a//b', 'svc/generic/v2/+']) {
    const res = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic, basicCredentialsSetId: setId } });
    assert.is(res.status, 422, topic);
    assert.ok(res.text.includes('svc/generic/v2') && res.text.includes('svc/push/v1'), res.text);
  }
  // Refusals of the body's shape name them too: an empty topic, a malformed or missing set id, a field too many.
  for (const body of [{ topic: '', basicCredentialsSetId: setId }, { topic: '/x', basicCredentialsSetId: 'nope' }, { topic: 'svc/generic/v2/z' }, { topic: 'svc/generic/v2/z', basicCredentialsSetId: setId, extra: 1 }]) {
    const res = await t.call('POST', '/api/reserved-mqtt-topics', { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.ok(res.text.endsWith(`; ${ROOTS_NOTE}`), res.text);
  }
  const push = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/push/v1/another/x', basicCredentialsSetId: setId } });
  assert.is(push.status, 422);
  assert.ok(push.text.endsWith(`; ${ROOTS_NOTE}`), push.text);
  const unknown = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/generic/v2/y', basicCredentialsSetId: 'cccccccccccccccccccccccc' } });
  assert.is(unknown.status, 422);
  assert.match(unknown.text, /basicCredentialsSetId/);
  assert.ok(unknown.text.includes('svc/generic/v2'), unknown.text);
});

prov('given the document, then the note it adds to a reservation\'s refusals names the roots the domain allows', () => {
  const post = (loadOpenApi().paths as Record<string, Record<string, Record<string, unknown>>>)['/api/reserved-mqtt-topics']!.post!;
  assert.is(post['x-refusal-note'], ROOTS_NOTE);
});

prov('when a topic is reserved twice, then 409', async ({ t, setId }) => {
  await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/meter/v1/twice', basicCredentialsSetId: setId } });
  const res = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/meter/v1/twice', basicCredentialsSetId: setId } });
  assert.is(res.status, 409);
});

prov('when a user without rights on the credentials set reserves a topic for it, then the same 422 as for a set that does not exist', async ({ t, setId }) => {
  const installer = await givenUser(t, 'inst', { attributes: { roles: ['installer'] } });
  const res = await t.call('POST', '/api/reserved-mqtt-topics', { token: installer.token, body: { topic: 'svc/generic/v2/steal', basicCredentialsSetId: setId } });
  const unknown = await t.call('POST', '/api/reserved-mqtt-topics', { token: installer.token, body: { topic: 'svc/generic/v2/steal', basicCredentialsSetId: 'ffffffffffffffffffffffff' } });
  assert.is(res.status, 422, res.text);
  assert.is(res.text, unknown.text);
});

prov('when a Generic connector is created with the internal broker, then it returns _id, name, basicCredentialsSetId, integration', async ({ t, setId }) => {
  const res = await t.call('POST', '/api/connectors', { body: { name: 'Internal', basicCredentialsSetId: setId, integration: 'Generic' } });
  assert.is(res.status, 201, res.text);
  assert.equal(res.body, { _id: res.body._id, name: 'Internal', basicCredentialsSetId: setId, integration: 'Generic' });
  assert.is((await t.call('GET', `/api/connectors/${res.body._id}`)).status, 200);
  assert.is((await t.call('DELETE', `/api/connectors/${res.body._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/connectors/${res.body._id}`)).status, 404);
});

prov('when a Generic connector is created with an external broker, then the password is never returned', async ({ t }) => {
  const body = { name: 'External', integration: 'Generic', mqttServer: { host: 'broker.example', port: 8883, protocol: 'mqtts', username: 'u', password: 'p4ss' }, downlink: { topic: 'down/x' } };
  const res = await t.call('POST', '/api/connectors', { body });
  assert.is(res.status, 201, res.text);
  assert.is(res.body.mqttServer.password, undefined);
  assert.is(res.body.downlink.topic, 'down/x');
  assert.not.ok((await t.call('GET', '/api/connectors')).text.includes('p4ss'));
});

prov('when a Generic connector has neither or both setups, or an external one without downlink topic, then 422', async ({ t, setId }) => {
  const server = { host: 'h', port: 1883, protocol: 'mqtt' };
  for (const body of [
    { name: 'n', integration: 'Generic' },
    { name: 'n', integration: 'Generic', basicCredentialsSetId: setId, mqttServer: server, downlink: { topic: 't' } },
    { name: 'n', integration: 'Generic', mqttServer: server },
    { name: 'n', integration: 'Generic', mqttServer: { ...server, port: 1234 }, downlink: { topic: 't' } },
  ]) {
    const res = await t.call('POST', '/api/connectors', { body });
    assert.is(res.status, 422, JSON.stringify(body) + res.text);
  }
});

prov('when a credentials set is read and then deleted, then its reserved topics leave the list and its MQTT login is refused', async ({ t }) => {
  const set = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'doomed', password: 'doomed-password' } });
  assert.is(set.status, 201, set.text);
  const topic = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/tracker/v1/doomed', basicCredentialsSetId: set.body._id } });
  assert.is(topic.status, 201, topic.text);
  await (await connectMqtt(t, 'doomed', 'doomed-password')).endAsync();

  const read = await t.call('GET', `/api/basic-credentials-sets/${set.body._id}`);
  assert.is(read.status, 200, read.text);
  assert.equal(Object.keys(read.body).sort(), ['_id', 'createdAt', 'username']);
  assert.is(read.body._id, set.body._id);
  assert.is(read.body.username, 'doomed');
  assert.not.ok(read.text.includes('doomed-password') || read.text.includes('scrypt'));

  assert.is((await t.call('DELETE', `/api/basic-credentials-sets/${set.body._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/basic-credentials-sets/${set.body._id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/basic-credentials-sets/${set.body._id}`)).status, 404);
  assert.not.ok((await t.call('GET', '/api/basic-credentials-sets')).body.some((x: { _id: string }) => x._id === set.body._id));
  assert.not.ok((await t.call('GET', '/api/reserved-mqtt-topics')).body.some((x: { topic: string }) => x.topic === 'svc/tracker/v1/doomed'));
  const login = await connectMqtt(t, 'doomed', 'doomed-password').then(() => null, (e: Error) => e);
  assert.ok(login, 'the login of a deleted credentials set is refused');
  // the username is free again
  assert.is((await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'doomed', password: 'new-password' } })).status, 201);
});

prov('when another user was granted nothing, then get and delete answer 404 and the lists are empty; a read grant shows the set, read-only', async ({ t }) => {
  const set = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'private', password: 'private-password' } });
  const topic = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: 'svc/meter/v1/private', basicCredentialsSetId: set.body._id } });
  const connector = await t.call('POST', '/api/connectors', { body: { name: 'Private', basicCredentialsSetId: set.body._id, integration: 'Generic' } });
  assert.ok(set.status === 201 && topic.status === 201 && connector.status === 201);
  // every method is allowed to this role; the objects themselves are not
  const other = await givenUser(t, 'other-admin', { attributes: { roles: ['admin'] } });
  const as = { token: other.token };
  for (const path of [`/api/basic-credentials-sets/${set.body._id}`, `/api/reserved-mqtt-topics/${topic.body._id}`, `/api/connectors/${connector.body._id}`]) {
    assert.is((await t.call('GET', path, as)).status, 404, `GET ${path}`);
    assert.is((await t.call('DELETE', path, as)).status, 404, `DELETE ${path}`);
    assert.is((await t.call('GET', path)).status, 200, `${path} is still there`);
  }
  for (const path of ['/api/basic-credentials-sets', '/api/reserved-mqtt-topics', '/api/connectors']) {
    const list = await t.call('GET', path, as);
    assert.is(list.status, 200, path);
    assert.equal(list.body, [], path);
  }

  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'credentialsSet', resourceId: set.body._id, subjectType: 'singleton', subjectId: other.id, scope: ['read'] } });
  assert.ok(grant.status < 300, grant.text);
  assert.equal((await t.call('GET', '/api/basic-credentials-sets', as)).body.map((x: { _id: string }) => x._id), [set.body._id]);
  assert.is((await t.call('GET', `/api/basic-credentials-sets/${set.body._id}`, as)).status, 200);
  assert.is((await t.call('DELETE', `/api/basic-credentials-sets/${set.body._id}`, as)).status, 403);
  assert.equal((await t.call('GET', '/api/reserved-mqtt-topics', as)).body, []);
});

prov.run();
