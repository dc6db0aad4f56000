/**
 * The authorization matrix of every calculation route: each built-in role and
 * a custom one (the method check), each with no right, `read` or `write` on
 * the calculation (the object check).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser, type GivenUser } from '../users/given.js';
import { givenCalculation, givenDevice, grant, lastValue } from './given.js';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

/** What each role allows on `calculation`, as docs/access.md says. */
const ROLES: Record<string, Method[]> = {
  admin: ['GET', 'POST', 'PUT', 'DELETE'],
  editor: ['GET', 'PUT'],
  installer: ['GET'],
  viewerBasic: ['GET'],
  viewerStandard: ['GET'],
  viewerFull: ['GET'],
  calculationKeeper: ['GET', 'POST', 'PUT', 'DELETE'],
};
const ACCESS = ['none', 'read', 'write'] as const;

interface Ctx {
  t: TestPlatform;
  users: Map<string, GivenUser>;
  source: string;
  destination: string;
}

const matrix = suite<Ctx>('calculation routes: roles and object access');

matrix.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const custom = await ctx.t.call('POST', '/api/roles', { body: { name: 'calculationKeeper', permissions: { calculation: ['GET', 'POST', 'PUT', 'DELETE'] } } });
  assert.is(custom.status, 201, custom.text);
  ctx.source = await givenDevice(ctx.t, 'matrix source');
  ctx.destination = await givenDevice(ctx.t, 'matrix destination');
  ctx.users = new Map();
  for (const role of Object.keys(ROLES)) {
    const user = await givenUser(ctx.t, `matrix-${role.toLowerCase()}`, { attributes: { roles: [role] } });
    // Rights on the devices, so that only the role and the right on the calculation decide.
    await grant(ctx.t, 'device', ctx.source, user.id, ['read']);
    await grant(ctx.t, 'device', ctx.destination, user.id, ['write', 'read']);
    ctx.users.set(role, user);
  }
});
matrix.after(async (ctx) => {
  await ctx.t.stop();
});

for (const [role, allowed] of Object.entries(ROLES)) {
  for (const access of ACCESS) {
    matrix(`given a ${role} with ${access === 'none' ? 'no right' : access} on a calculation, then GET, list, PUT and DELETE answer by role first, then by right`, async ({ t, users, source, destination }) => {
      const user = users.get(role)!;
      const as = { token: user.token };
      const calc = await givenCalculation(t, lastValue([[source, 'in']], [destination, `${role}${access}`]));
      if (access !== 'none') await grant(t, 'calculation', calc._id, user.id, access === 'write' ? ['write', 'read'] : ['read']);
      const readable = access !== 'none';
      const byRight = (method: Method, ok: number) => (!allowed.includes(method) ? 403 : !readable ? 404 : access === 'read' ? 403 : ok);

      const one = await t.call('GET', `/api/calculations/${calc._id}`, as);
      assert.is(one.status, readable ? 200 : 404, `GET one: ${one.text}`);
      const list = await t.call('GET', '/api/calculations', as);
      assert.is(list.status, 200);
      assert.is(list.body.some((x: { _id: string }) => x._id === calc._id), readable, 'listed exactly when readable');

      const before = await eventCount(t);
      const put = await t.call('PUT', `/api/calculations/${calc._id}`, { ...as, body: lastValue([[source, 'in']], [destination, `${role}${access}`], 'max') });
      assert.is(put.status, byRight('PUT', 200), `PUT: ${put.text}`);
      if (put.status === 403 && !allowed.includes('PUT')) assert.is(put.text, 'Forbidden');
      const del = await t.call('DELETE', `/api/calculations/${calc._id}`, as);
      assert.is(del.status, byRight('DELETE', 204), `DELETE: ${del.text}`);
      if (put.status !== 200 && del.status !== 204) assert.is(await eventCount(t), before, 'a refused change writes nothing');
    });
  }
  matrix(`given a ${role}, when it creates a calculation over devices it may use, then ${allowed.includes('POST') ? '201, and it owns it' : '403 Forbidden'}`, async ({ t, users, source, destination }) => {
    const user = users.get(role)!;
    const res = await t.call('POST', '/api/calculations', { token: user.token, body: lastValue([[source, 'in']], [destination, `${role}Own`]) });
    if (!allowed.includes('POST')) {
      assert.is(res.status, 403, res.text);
      assert.is(res.text, 'Forbidden');
      return;
    }
    assert.is(res.status, 201, res.text);
    assert.is(res.body.createdBy, user.id);
    assert.is((await t.call('DELETE', `/api/calculations/${res.body._id}`, { token: user.token })).status, 204);
  });
}

matrix('given a calculation shared with a usergroup, when a member reads it, then 200, and it is listed', async ({ t, users, source, destination }) => {
  const member = users.get('viewerFull')!;
  const calc = await givenCalculation(t, lastValue([[source, 'in']], [destination, 'grouped']));
  const group = await t.call('POST', '/api/usergroups', { body: { name: 'calc readers' } });
  assert.is(group.status, 201, group.text);
  assert.ok((await t.call('POST', `/api/usergroups/${group.body._id}/members`, { body: { userId: member.id } })).status < 300);
  const shared = await t.call('POST', '/api/access-rights', { body: { resourceType: 'calculation', resourceId: calc._id, subjectType: 'group', subjectId: group.body._id, scope: ['read'] } });
  assert.ok(shared.status < 300, shared.text);
  assert.is((await t.call('GET', `/api/calculations/${calc._id}`, { token: member.token })).status, 200);
  assert.ok((await t.call('GET', '/api/calculations', { token: member.token })).body.some((x: { _id: string }) => x._id === calc._id));
});

matrix('given no token, then every calculation route answers 401', async ({ t }) => {
  const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
  for (const [method, path] of [['GET', '/api/calculations'], ['POST', '/api/calculations'], ['GET', `/api/calculations/${id}`], ['PUT', `/api/calculations/${id}`], ['DELETE', `/api/calculations/${id}`]] as const) {
    assert.is((await t.call(method, path, { token: null, body: method === 'POST' || method === 'PUT' ? {} : undefined })).status, 401, `${method} ${path}`);
  }
});

matrix.run();
