import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser } from '../users/given.js';
import { loadOpenApi } from '../../api/openapi.js';
import { readFileSync } from 'node:fs';
import { BUILTIN_ROLES, RESOURCE_TYPES, builtinMethods } from '../../domain/access/roles.js';

const roles = suite<{ t: TestPlatform }>('roles');

roles.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
roles.after(async (ctx) => {
  await ctx.t.stop();
});

roles('given a viewer, when it reads usergroups, then 200; when it creates one, then 403 Forbidden', async ({ t }) => {
  for (const role of ['viewerBasic', 'viewerStandard', 'viewerFull', 'installer']) {
    const viewer = await givenUser(t, `a-${role}`, { attributes: { roles: [role] } });
    assert.is((await t.call('GET', '/api/usergroups', { token: viewer.token })).status, 200);
    const res = await t.call('POST', '/api/usergroups', { token: viewer.token, body: { name: 'nope' } });
    assert.is(res.status, 403, role);
    assert.is(res.text, 'Forbidden');
  }
});

roles('given a role without the method, when it sends a body that would fail validation, then 403 Forbidden, not a verdict on the body', async ({ t }) => {
  const viewer = await givenUser(t, 'nosy-viewer', { attributes: { roles: ['viewerFull'] } });
  const editor = await givenUser(t, 'nosy-editor', { attributes: { roles: ['editor'] } });
  const before = await eventCount(t);
  for (const [who, method, path, body] of [
    [viewer, 'POST', '/api/dashboards', {}],
    [viewer, 'POST', '/api/usergroups', { name: 'x', unknown: true }],
    [editor, 'POST', '/api/dashboards', { widgets: 'not a list' }],
    [editor, 'DELETE', '/api/dashboards/not-an-id', undefined],
  ] as const) {
    const res = await t.call(method, path, { token: who.token, body });
    assert.is(res.status, 403, `${method} ${path}: ${res.status} ${res.text}`);
    assert.is(res.text, 'Forbidden');
  }
  const raw = await t.call('POST', '/api/dashboards', { token: viewer.token, raw: '{"name": ' });
  assert.is(raw.status, 403, 'an unparseable body is not read before the role check');
  assert.is(await eventCount(t), before);
});

roles('given a user without roles, then it is a viewerBasic', async ({ t }) => {
  const plain = await givenUser(t, 'plain');
  assert.is((await t.call('GET', '/api/roles', { token: plain.token })).status, 200);
  assert.is((await t.call('POST', '/api/usergroups', { token: plain.token, body: { name: 'nope' } })).status, 403);
});

roles('given an editor, when it edits a group it may write, then 200; when it creates or deletes, then 403', async ({ t }) => {
  const admin = await givenUser(t, 'boss', { attributes: { roles: ['admin'] } });
  const editor = await givenUser(t, 'ed', { attributes: { roles: ['editor'] } });
  const { body: group } = await t.call('POST', '/api/usergroups', { token: admin.token, body: { name: 'edited' } });
  await t.call('POST', '/api/access-rights', {
    token: admin.token,
    body: { resourceType: 'usergroup', resourceId: group._id, subjectType: 'singleton', subjectId: editor.id, scope: ['write'] },
  });
  assert.is((await t.call('PATCH', `/api/usergroups/${group._id}`, { token: editor.token, body: { name: 'edited too' } })).status, 200);
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}`, { token: editor.token })).status, 403);
  assert.is((await t.call('POST', '/api/usergroups', { token: editor.token, body: { name: 'new' } })).status, 403);
});

roles('given a custom role, when a user holds it, then exactly its methods pass; replaced or deleted, the change applies at once', async ({ t }) => {
  const created = await t.call('POST', '/api/roles', { body: { name: 'groupKeeper', permissions: { usergroup: ['GET', 'POST'] } } });
  assert.is(created.status, 201, created.text);
  assert.equal(created.body, { name: 'groupKeeper', builtin: false, permissions: { usergroup: ['GET', 'POST'] } });
  const keeper = await givenUser(t, 'keeper', { attributes: { roles: ['groupKeeper'] } });
  const made = await t.call('POST', '/api/usergroups', { token: keeper.token, body: { name: 'kept' } });
  assert.is(made.status, 201);
  assert.is((await t.call('DELETE', `/api/usergroups/${made.body._id}`, { token: keeper.token })).status, 403);
  assert.is((await t.call('GET', '/api/roles', { token: keeper.token })).status, 403, 'no GET on role in this role');

  const replaced = await t.call('PUT', '/api/roles/groupKeeper', { body: { permissions: { usergroup: ['GET', 'DELETE'] } } });
  assert.is(replaced.status, 200, replaced.text);
  assert.is((await t.call('POST', '/api/usergroups', { token: keeper.token, body: { name: 'again' } })).status, 403);
  assert.is((await t.call('DELETE', `/api/usergroups/${made.body._id}`, { token: keeper.token })).status, 204);

  assert.is((await t.call('DELETE', '/api/roles/groupKeeper')).status, 204);
  assert.is((await t.call('GET', '/api/roles/groupKeeper')).status, 404);
  assert.is((await t.call('GET', '/api/usergroups', { token: keeper.token })).status, 403, 'a deleted role allows nothing');
  assert.is((await t.call('DELETE', '/api/roles/groupKeeper')).status, 404);
});

roles('when roles are listed, then the built-ins come with their table and custom roles follow', async ({ t }) => {
  await t.call('POST', '/api/roles', { body: { name: 'auditor', permissions: { log: ['GET'] } } });
  const res = await t.call('GET', '/api/roles');
  assert.equal(res.body.map((r: { name: string }) => r.name), ['admin', 'editor', 'installer', 'viewerBasic', 'viewerStandard', 'viewerFull', 'auditor']);
  const editor = (await t.call('GET', '/api/roles/editor')).body;
  assert.equal(editor.permissions.dashboard, ['GET', 'PATCH', 'PUT']);
  assert.equal((await t.call('GET', '/api/roles/installer')).body.permissions.device, ['GET', 'POST', 'PATCH', 'PUT']);
  assert.equal((await t.call('GET', '/api/roles/viewerFull')).body.permissions.dashboard, ['GET']);
});

roles('when a role clashes with a built-in or exists, or its body is wrong, then 4xx and nothing is written', async ({ t }) => {
  await t.call('POST', '/api/roles', { body: { name: 'taken', permissions: {} } });
  const before = await eventCount(t);
  const cases: [unknown, number, RegExp][] = [
    [{ name: 'admin', permissions: {} }, 422, /^ERR - name admin is a built-in role$/],
    [{ name: 'ViewerBasic', permissions: {} }, 422, /^ERR - name ViewerBasic is a built-in role$/],
    [{ name: 'taken', permissions: {} }, 409, /taken/],
    [{ name: 'x', permissions: { spaceship: ['GET'] } }, 422, /^ERR - permissions/],
    [{ name: 'x', permissions: { device: ['FETCH'] } }, 422, /^ERR - permissions.device.0 /],
    [{ name: 'x', permissions: { device: 'GET' } }, 422, /^ERR - permissions.device /],
    [{ name: 'has space', permissions: {} }, 422, /^ERR - name /],
    [{ name: 'x'.repeat(51), permissions: {} }, 422, /^ERR - name /],
    [{ name: 'x' }, 422, /^ERR - .*permissions/],
  ];
  for (const [body, status, message] of cases) {
    const res = await t.call('POST', '/api/roles', { body });
    assert.is(res.status, status, `${JSON.stringify(body)}: ${res.text}`);
    assert.match(res.text, message);
  }
  assert.is((await t.call('PUT', '/api/roles/admin', { body: { permissions: {} } })).status, 422);
  assert.is((await t.call('DELETE', '/api/roles/editor')).status, 422);
  assert.is(await eventCount(t), before);
});

roles('when a non-admin manages roles, then 403 even if a custom role lists the methods', async ({ t }) => {
  await t.call('POST', '/api/roles', { body: { name: 'roleWriter', permissions: { role: ['GET', 'POST', 'PUT', 'DELETE'] } } });
  const writer = await givenUser(t, 'writer', { attributes: { roles: ['roleWriter'] } });
  assert.is((await t.call('GET', '/api/roles', { token: writer.token })).status, 200);
  assert.is((await t.call('POST', '/api/roles', { token: writer.token, body: { name: 'mine', permissions: {} } })).status, 403);
  assert.is((await t.call('PUT', '/api/roles/roleWriter', { token: writer.token, body: { permissions: { user: ['POST'] } } })).status, 403);
});

roles('when the OpenAPI document is read, then every operation names its x-resource or is public, and role permissions cover every resource type', () => {
  const doc = loadOpenApi();
  const methods = new Set(['get', 'post', 'put', 'patch', 'delete']);
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item as Record<string, { 'x-resource'?: string; security?: unknown[] }>)) {
      if (!methods.has(method)) continue;
      const known = op['x-resource'] === 'self' || (RESOURCE_TYPES as readonly string[]).includes(op['x-resource'] ?? '');
      assert.ok(known || (Array.isArray(op.security) && op.security.length === 0), `${method.toUpperCase()} ${path} has no known x-resource`);
    }
  }
  const permissions = doc.components.schemas.Permissions as { properties: Record<string, unknown> };
  assert.equal(Object.keys(permissions.properties).sort(), [...RESOURCE_TYPES].sort());
});

roles('when docs/access.md is read, then its role table is the one the platform enforces', () => {
  const doc = readFileSync(new URL('../../docs/access.md', import.meta.url), 'utf8');
  const rows = new Map(
    [...doc.matchAll(/^\| `(\w+)` \| (.+) \|$/gm)].map((m) => [m[1]!, m[2]!.split(' | ')]),
  );
  for (const type of RESOURCE_TYPES) {
    const row = rows.get(type);
    assert.ok(row, `docs/access.md has no row for ${type}`);
    const expected = BUILTIN_ROLES.map((role) => {
      const methods = builtinMethods(role, type);
      return methods.length === 5 ? 'all' : methods.join(', ');
    });
    assert.equal(row, expected, type);
  }
});

roles.run();
