import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { assertNothingWritten } from '../security/given.js';

interface Ctx {
  t: TestPlatform;
  dev: GivenUser;
}

const test = suite<Ctx>('client apps and the usergroups\' app filter');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const role = await ctx.t.call('POST', '/api/roles', { body: { name: 'appDeveloper', permissions: { app: ['GET', 'POST', 'PUT', 'DELETE'], usergroup: ['GET'], channel: ['GET', 'POST'], device: ['GET', 'POST'], accessRight: ['GET', 'POST'] } } });
  assert.is(role.status, 201, role.text);
  ctx.dev = await givenUser(ctx.t, 'dev', { attributes: { roles: ['appDeveloper'] } });
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

async function app(t: TestPlatform, name: string, token = t.adminToken): Promise<{ _id: string; secret: string }> {
  const res = await t.call('POST', '/api/apps', { token, body: { name } });
  assert.is(res.status, 201, res.text);
  return res.body;
}

test('when an app is created, then its secret is in that answer only, stored as a salted hash, in no event and no later read', async ({ t }) => {
  const created = await t.call('POST', '/api/apps', { body: { name: 'Dispatch', description: 'Vans' } });
  assert.is(created.status, 201, created.text);
  assert.match(created.body.secret, /^[A-Za-z0-9_-]{43}$/);
  assert.equal(Object.keys(created.body).sort(), ['_id', 'createdAt', 'description', 'name', 'secret', 'updatedAt']);
  const read = await t.call('GET', `/api/apps/${created.body._id}`);
  assert.equal(Object.keys(read.body).sort(), ['_id', 'createdAt', 'description', 'name', 'updatedAt']);
  assert.not.ok(JSON.stringify((await t.call('GET', '/api/apps')).body).includes(created.body.secret));
  const row = await t.platform.deps.db.selectFrom('apps').select('secret_hash').where('id', '=', created.body._id).executeTakeFirstOrThrow();
  assert.match(row.secret_hash, /^scrypt\$[0-9a-f]{32}\$[0-9a-f]{64}$/);
  const events = await t.platform.deps.store.readStream(`app-${created.body._id}`);
  assert.not.ok(JSON.stringify(events.map((e) => [e.data, e.metadata])).includes(created.body.secret), 'no event holds the secret');

  const rotated = await t.call('POST', `/api/apps/${created.body._id}/secret`);
  assert.is(rotated.status, 200);
  assert.is(rotated.body._id, created.body._id);
  assert.is.not(rotated.body.secret, created.body.secret);
  const after = await t.platform.deps.db.selectFrom('apps').select('secret_hash').where('id', '=', created.body._id).executeTakeFirstOrThrow();
  assert.is.not(after.secret_hash, row.secret_hash);
});

test('given an app, when it is renamed, described, or deleted, then reads follow; a bad body is 422 and nothing is written', async ({ t }) => {
  const { _id } = await app(t, 'Before');
  const renamed = await t.call('PUT', `/api/apps/${_id}`, { body: { name: 'After', description: 'Now' } });
  assert.is(renamed.status, 200);
  assert.is(renamed.body.name, 'After');
  const undescribed = await t.call('PUT', `/api/apps/${_id}`, { body: { name: 'After' } });
  assert.is(undescribed.body.description, undefined, 'a replace without description removes it');
  for (const body of [{}, { name: '' }, { name: '   ' }, { name: 'x'.repeat(101) }, { name: 'ok', secret: 'mine' }, { name: 7 }]) {
    const res = await t.call('POST', '/api/apps', { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.match(res.text, /^ERR - /);
    await assertNothingWritten(t, res);
  }
  assert.is((await t.call('DELETE', `/api/apps/${_id}`)).status, 204);
  assert.is((await t.call('GET', `/api/apps/${_id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/apps/${_id}`)).status, 404);
});

test('given apps and a group with an app filter, when a member lists, reads or counts apps, then only the allowed ones show', async ({ t, dev }) => {
  // The developer owns three apps and is a member of a group whose owner (the admin) filters apps.
  const a = await app(t, 'Alpha', dev.token);
  const b = await app(t, 'Bravo', dev.token);
  const c = await app(t, 'Charlie', dev.token);
  const group = (await t.call('POST', '/api/usergroups', { body: { name: 'Filtered' } })).body._id;
  await t.call('POST', `/api/usergroups/${group}/members`, { body: { userId: dev.id } });
  const names = async () => (await t.call('GET', '/api/apps', { token: dev.token })).body.map((x: { name: string }) => x.name);
  assert.equal(await names(), ['Alpha', 'Bravo', 'Charlie'], 'a group without a filter restricts nothing');

  // The admin cannot see the developer's apps, so cannot list them in a filter: one 422 whether they exist or not.
  const hidden = await t.call('PUT', `/api/usergroups/${group}/app-filter`, { body: { appIds: [a._id] } });
  assert.is(hidden.status, 422, hidden.text);
  assert.is(hidden.text, 'ERR - appIds.0 is not an app you can see');
  await assertNothingWritten(t, hidden);
  const admin = (await t.call('GET', '/api/users?username=admin')).body[0].id;
  for (const appId of [a._id, b._id]) {
    const shared = await t.call('POST', '/api/access-rights', { token: dev.token, body: { resourceType: 'app', resourceId: appId, subjectType: 'singleton', subjectId: admin, scope: ['read'] } });
    assert.is(shared.status, 201, shared.text);
  }
  const set = await t.call('PUT', `/api/usergroups/${group}/app-filter`, { body: { appIds: [a._id, a._id] } });
  assert.is(set.status, 200, set.text);
  assert.equal(set.body, { groupId: group, filtered: true, appIds: [a._id] });
  assert.equal(await names(), ['Alpha']);
  assert.is((await t.call('GET', `/api/apps/${b._id}`, { token: dev.token })).status, 404, 'a filtered-out app is hidden even from its owner');
  assert.is((await t.call('PUT', `/api/apps/${b._id}`, { token: dev.token, body: { name: 'B' } })).status, 404);
  assert.is((await t.call('GET', '/api/apps?options=count&limit=1', { token: dev.token })).headers.get('x-total-count'), '1');

  const allowed = await t.call('POST', `/api/usergroups/${group}/app-filter`, { body: { appId: b._id } });
  assert.is(allowed.status, 201);
  assert.is((await t.call('POST', `/api/usergroups/${group}/app-filter`, { body: { appId: b._id } })).status, 200);
  assert.equal(await names(), ['Alpha', 'Bravo']);

  // A second filtered group: only what both allow.
  const second = (await t.call('POST', '/api/usergroups', { body: { name: 'Also filtered' } })).body._id;
  await t.call('POST', `/api/usergroups/${second}/members`, { body: { userId: dev.id } });
  assert.is((await t.call('PUT', `/api/usergroups/${second}/app-filter`, { body: { appIds: [b._id] } })).status, 200);
  assert.equal(await names(), ['Bravo']);
  assert.is((await t.call('PUT', `/api/usergroups/${second}/app-filter`, { body: { appIds: [] } })).status, 200);
  assert.equal(await names(), [], 'an empty filter lets nothing through');
  assert.is((await t.call('DELETE', `/api/usergroups/${second}/app-filter`)).status, 204);
  assert.equal((await t.call('GET', `/api/usergroups/${second}/app-filter`)).body, { groupId: second, filtered: false, appIds: [] });

  assert.is((await t.call('DELETE', `/api/usergroups/${group}/app-filter/${a._id}`)).status, 204);
  assert.is((await t.call('DELETE', `/api/usergroups/${group}/app-filter/${a._id}`)).status, 404);
  assert.equal(await names(), ['Bravo']);
  await t.call('DELETE', `/api/apps/${b._id}`, { token: dev.token });
  assert.equal((await t.call('GET', `/api/usergroups/${group}/app-filter`)).body, { groupId: group, filtered: true, appIds: [] }, 'a deleted app leaves the filter, which stays on');
  assert.equal(await names(), []);
  await t.call('DELETE', `/api/usergroups/${group}/app-filter`);
  assert.equal(await names(), ['Alpha', 'Charlie']);
  void c;
});

test('when app filter bodies are wrong, then 422 naming the field, and nothing is written', async ({ t }) => {
  const group = (await t.call('POST', '/api/usergroups', { body: { name: 'Strict filter' } })).body._id;
  const base = `/api/usergroups/${group}/app-filter`;
  const cases: [string, unknown, RegExp][] = [
    ['PUT', {}, /^ERR - appIds is required/],
    ['PUT', { appIds: ['nope'] }, /^ERR - appIds\.0 /],
    ['PUT', { appIds: Array.from({ length: 1001 }, (_, i) => i.toString(16).padStart(24, '0')) }, /^ERR - appIds /],
    ['POST', { appIds: [] }, /^ERR - /],
    ['POST', { appId: 'cccccccccccccccccccccccc' }, /^ERR - appId is not an app you can see$/],
  ];
  for (const [method, body, message] of cases) {
    const res = await t.call(method, base, { body });
    assert.is(res.status, 422, `${method} ${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    assert.match(res.text, message);
    await assertNothingWritten(t, res);
  }
  assert.is((await t.call('GET', '/api/usergroups/cccccccccccccccccccccccc/app-filter')).status, 404);
});

test('given changes to a group, when its owner reads the logs for userGroup, then members and app filter changes are there with the widget\'s values', async ({ t }) => {
  const una = await givenUser(t, 'una');
  const group = (await t.call('POST', '/api/usergroups', { body: { name: 'Logged group' } })).body._id;
  await t.call('PATCH', `/api/usergroups/${group}`, { body: { name: 'Logged group 2' } });
  await t.call('POST', `/api/usergroups/${group}/members`, { body: { userId: una.id } });
  await t.call('DELETE', `/api/usergroups/${group}/members/${una.id}`);
  const { _id } = await app(t, 'Logged app');
  await t.call('PUT', `/api/usergroups/${group}/app-filter`, { body: { appIds: [_id] } });
  await t.call('DELETE', `/api/usergroups/${group}/app-filter/${_id}`);
  await t.call('DELETE', `/api/usergroups/${group}/app-filter`);
  const logs = await t.call('GET', `/api/logs?resourceType=userGroup&resourceId=${group}`);
  assert.is(logs.status, 200);
  const seen = logs.body.logs.map((l: { message: string; type: string; priority: string; category: string; resourceType: string }) => `${l.message} | ${l.resourceType} ${l.type} ${l.priority} ${l.category}`).reverse();
  assert.equal(seen, [
    'Group Logged group created | userGroup info low update',
    'Renamed to Logged group 2 | userGroup info low update',
    `Member una (${una.id}) added | userGroup info medium access`,
    `Member una (${una.id}) removed | userGroup info medium access`,
    'App filter set: members see only one app | userGroup info medium access',
    `App ${_id} removed from the app filter | userGroup info low access`,
    'App filter removed: members see every app they have rights on | userGroup info medium access',
  ]);
  assert.is((await t.call('GET', `/api/logs?resourceType=userGroup&resourceId=${group}`, { token: una.token })).body.logs.length, 0, 'others do not read it');
});

test('when a channel names an app as its MQTT recipient, then only an app the caller may write is accepted; any other is one and the same 422', async ({ t, dev }) => {
  const device = (await t.call('POST', '/api/iotnodes', { token: dev.token, body: { name: 'Dev sensor' } })).body._id;
  const own = await app(t, 'Own', dev.token);
  const others = await app(t, 'Not yours');
  const ok = await t.call('POST', '/api/channels', { token: dev.token, body: { iotnode: device, mqtt: { type: 'app', recipient: own._id } } });
  assert.is(ok.status, 201, ok.text);
  assert.equal(ok.body.mqtt, { type: 'app', recipient: own._id });
  const refusals = [];
  for (const recipient of [others._id, 'cccccccccccccccccccccccc', device]) {
    const res = await t.call('POST', '/api/channels', { token: dev.token, body: { iotnode: device, mqtt: { type: 'app', recipient } } });
    assert.is(res.status, 422, res.text);
    refusals.push(res.text);
    await assertNothingWritten(t, res);
  }
  assert.is(new Set(refusals).size, 1, 'the same answer whether the app exists or not');
  assert.match(refusals[0]!, /^ERR - mqtt\.recipient /);
});

test.run();
