/**
 * The authorization matrix of the locations, organizations, apps and
 * app-filter routes: every operation the document lists for them, for every
 * built-in role (the method check) and every scope a caller may hold on the
 * resource (the object check).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { loadOpenApi } from '../../api/openapi.js';
import { BUILTIN_ROLES, builtinMethods, type ResourceType } from '../../domain/access/roles.js';

type Need = 'read' | 'write' | 'admin';

interface Fixture {
  location: string;
  unit: { id: string; name: string };
  empty: string;
  member: string;
  stranger: string;
  app: string;
  group: string;
}

interface Op {
  /** A request on the fixture; no id: a collection operation (role check only). */
  request(f: Fixture, n: number): { path: string; body?: unknown };
  need?: Need;
  ok?: number;
  /** Changes the fixture so that it cannot be used again. */
  destructive?: boolean;
  /** A body that fails validation, for collection writes. */
  invalid?: unknown;
}

let counter = 0;
const location = { name: 'Matrix', lat: 1, lng: 2, defaultLayer: { name: 'Plan' } };

const OPS: Record<string, Op> = {
  'GET /api/locations': { request: () => ({ path: '/api/locations' }) },
  'POST /api/locations': { request: () => ({ path: '/api/locations' }), invalid: {} },
  'GET /api/locations/{id}': { request: (f) => ({ path: `/api/locations/${f.location}` }), need: 'read', ok: 200 },
  'PUT /api/locations/{id}': { request: (f) => ({ path: `/api/locations/${f.location}`, body: location }), need: 'write', ok: 200 },
  'DELETE /api/locations/{id}': { request: (f) => ({ path: `/api/locations/${f.location}` }), need: 'write', ok: 204, destructive: true },
  'GET /api/organizations': { request: () => ({ path: '/api/organizations' }) },
  'POST /api/organizations': { request: () => ({ path: '/api/organizations' }), invalid: {} },
  'GET /api/organizations/{id}': { request: (f) => ({ path: `/api/organizations/${f.unit.id}` }), need: 'read', ok: 200 },
  'PUT /api/organizations/{id}': { request: (f) => ({ path: `/api/organizations/${f.unit.id}`, body: { name: f.unit.name, description: 'changed' } }), need: 'write', ok: 200 },
  'DELETE /api/organizations/{id}': { request: (f) => ({ path: `/api/organizations/${f.empty}` }), need: 'write', ok: 204, destructive: true },
  'GET /api/organizations/{id}/members': { request: (f) => ({ path: `/api/organizations/${f.unit.id}/members` }), need: 'read', ok: 200 },
  'POST /api/organizations/{id}/members': { request: (f, n) => ({ path: `/api/organizations/${f.unit.id}/members`, body: { username: `matrix-member-${n}` } }), need: 'admin', ok: 201 },
  'PUT /api/organizations/{id}/members/{userId}': { request: (f) => ({ path: `/api/organizations/${f.unit.id}/members/${f.stranger}` }), need: 'admin', ok: 201, destructive: true },
  'DELETE /api/organizations/{id}/members/{userId}': { request: (f) => ({ path: `/api/organizations/${f.unit.id}/members/${f.member}` }), need: 'admin', ok: 204, destructive: true },
  'POST /api/organizations/{id}/members/{userId}/reset-password': { request: (f) => ({ path: `/api/organizations/${f.unit.id}/members/${f.member}/reset-password` }), need: 'admin', ok: 200 },
  'GET /api/apps': { request: () => ({ path: '/api/apps' }) },
  'POST /api/apps': { request: () => ({ path: '/api/apps' }), invalid: {} },
  'GET /api/apps/{id}': { request: (f) => ({ path: `/api/apps/${f.app}` }), need: 'read', ok: 200 },
  'PUT /api/apps/{id}': { request: (f) => ({ path: `/api/apps/${f.app}`, body: { name: 'Renamed' } }), need: 'write', ok: 200 },
  'DELETE /api/apps/{id}': { request: (f) => ({ path: `/api/apps/${f.app}` }), need: 'write', ok: 204, destructive: true },
  'POST /api/apps/{id}/secret': { request: (f) => ({ path: `/api/apps/${f.app}/secret` }), need: 'write', ok: 200 },
  'GET /api/usergroups/{groupId}/app-filter': { request: (f) => ({ path: `/api/usergroups/${f.group}/app-filter` }), need: 'read', ok: 200 },
  'PUT /api/usergroups/{groupId}/app-filter': { request: (f) => ({ path: `/api/usergroups/${f.group}/app-filter`, body: { appIds: [f.app] } }), need: 'write', ok: 200 },
  'POST /api/usergroups/{groupId}/app-filter': { request: (f) => ({ path: `/api/usergroups/${f.group}/app-filter`, body: { appId: f.app } }), need: 'write', ok: 200 },
  'DELETE /api/usergroups/{groupId}/app-filter': { request: (f) => ({ path: `/api/usergroups/${f.group}/app-filter` }), need: 'write', ok: 204, destructive: true },
  'DELETE /api/usergroups/{groupId}/app-filter/{appId}': { request: (f) => ({ path: `/api/usergroups/${f.group}/app-filter/${f.app}` }), need: 'write', ok: 204, destructive: true },
};

/** The operations of the document this matrix covers, with their resource type. */
const documented = Object.entries(loadOpenApi().paths).flatMap(([template, item]) =>
  Object.entries(item)
    .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
    .map(([method, op]) => ({ key: `${method.toUpperCase()} ${template}`, method: method.toUpperCase(), resource: (op as { 'x-resource': ResourceType })['x-resource'] }))
    .filter((o) => ['location', 'organization', 'app'].includes(o.resource) || o.key.includes('/app-filter')),
);

const test = suite<{ t: TestPlatform; stranger: GivenUser }>('authorization matrix: locations, organizations, apps, app filters');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.stranger = await givenUser(ctx.t, 'matrix-stranger');
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

async function fixture(t: TestPlatform, stranger: string): Promise<Fixture> {
  const n = ++counter;
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await t.call(method, path, { body });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  const unit = await ok('POST', '/api/organizations', { name: `Matrix unit ${n}` });
  const empty = await ok('POST', '/api/organizations', { name: `Matrix empty ${n}` });
  const member = await ok('POST', `/api/organizations/${unit._id}/members`, { username: `matrix-${n}` });
  const app = await ok('POST', '/api/apps', { name: `Matrix app ${n}` });
  const group = await ok('POST', '/api/usergroups', { name: `Matrix group ${n}` });
  await ok('PUT', `/api/usergroups/${group._id}/app-filter`, { appIds: [app._id] });
  const loc = await ok('POST', '/api/locations', location);
  return { location: loc._id, unit: { id: unit._id, name: unit.name }, empty: empty._id, member: member.id, stranger, app: app._id, group: group._id };
}

async function grant(t: TestPlatform, f: Fixture, userId: string, scope: string[]): Promise<void> {
  const resources: [string, string][] = [['location', f.location], ['organization', f.unit.id], ['organization', f.empty], ['app', f.app], ['usergroup', f.group]];
  for (const [resourceType, resourceId] of resources) {
    const res = await t.call('POST', '/api/access-rights', { body: { resourceType, resourceId, subjectType: 'singleton', subjectId: userId, scope } });
    assert.is(res.status, 201, res.text);
  }
}

test('every documented operation of these resources is in the matrix', () => {
  assert.equal(documented.map((o) => o.key).sort(), Object.keys(OPS).sort());
});

test('given a user of each built-in role without rights, then a method the role does not allow is 403 Forbidden before anything else, and one it allows meets the object check', async ({ t, stranger }) => {
  const f = await fixture(t, stranger.id);
  for (const role of BUILTIN_ROLES) {
    const user = await givenUser(t, `matrix-${role}`, { attributes: { roles: [role] } });
    for (const { key, method, resource } of documented) {
      const op = OPS[key]!;
      const { path, body } = op.request(f, ++counter);
      const res = await t.call(method, path, { token: user.token, body: op.need ? body : (op.invalid ?? body) });
      const allowed = builtinMethods(role, resource).includes(method as never);
      let expected: number;
      if (!allowed) expected = 403;
      else if (!op.need) expected = method === 'GET' ? 200 : 422;
      // Adding an existing user to a unit is a platform admin's call, checked before the unit.
      else if (key === 'PUT /api/organizations/{id}/members/{userId}' && role !== 'admin') expected = 403;
      else expected = 404;
      assert.is(res.status, expected, `${role} ${key}: ${res.status} ${res.text.slice(0, 100)}`);
      if (!allowed) assert.is(res.text, 'Forbidden');
    }
  }
});

const SCOPES: [string, string[]][] = [
  ['none', []],
  ['peek', ['peek']],
  ['read', ['read']],
  ['write', ['write']],
  ['admin', ['admin']],
];
const satisfies = (held: string, need: Need) => (need === 'read' ? ['read', 'write', 'admin'] : need === 'write' ? ['write', 'admin'] : ['admin']).includes(held);

test('given a platform admin holding each scope on the resources, then no scope or peek is 404, too little is 403 and enough succeeds', async ({ t, stranger }) => {
  for (const [name, scope] of SCOPES) {
    const user = await givenUser(t, `matrix-scope-${name}`, { attributes: { roles: ['admin'] } });
    const shared = await fixture(t, stranger.id);
    if (scope.length) await grant(t, shared, user.id, scope);
    // Destructive operations last, each on a fixture of its own when it would succeed.
    const keys = Object.keys(OPS).filter((k) => OPS[k]!.need).sort((a, b) => Number(!!OPS[a]!.destructive) - Number(!!OPS[b]!.destructive));
    for (const key of keys) {
      const op = OPS[key]!;
      const succeeds = satisfies(name, op.need!);
      let f = shared;
      if (op.destructive && succeeds) {
        f = await fixture(t, stranger.id);
        await grant(t, f, user.id, scope);
      }
      const { path, body } = op.request(f, ++counter);
      const res = await t.call(key.split(' ')[0]!, path, { token: user.token, body });
      const expected = name === 'none' || name === 'peek' ? 404 : succeeds ? op.ok! : 403;
      assert.is(res.status, expected, `${name} ${key}: ${res.status} ${res.text.slice(0, 100)}`);
    }
  }
});

test('given rights held through a usergroup, then they count like one\'s own', async ({ t, stranger }) => {
  const user = await givenUser(t, 'matrix-grouped', { attributes: { roles: ['admin'] } });
  const f = await fixture(t, stranger.id);
  const team = (await t.call('POST', '/api/usergroups', { body: { name: 'Matrix team' } })).body._id;
  await t.call('POST', `/api/usergroups/${team}/members`, { body: { userId: user.id } });
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'app', resourceId: f.app, subjectType: 'group', subjectId: team, scope: ['read'] } });
  assert.is((await t.call('GET', `/api/apps/${f.app}`, { token: user.token })).status, 200);
  assert.is((await t.call('PUT', `/api/apps/${f.app}`, { token: user.token, body: { name: 'x' } })).status, 403);
  assert.is((await t.call('GET', '/api/apps?options=count', { token: user.token })).headers.get('x-total-count'), '1');
});

test.run();
