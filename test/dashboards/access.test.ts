import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { TEMPLATES, givenDashboard, givenWidget } from './given.js';

interface Ctx {
  t: TestPlatform;
  editor: GivenUser;
  viewer: GivenUser;
  reader: GivenUser;
  designer: GivenUser;
}

const access = suite<Ctx>('dashboard roles and access');

access.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.editor = await givenUser(ctx.t, 'dash-editor', { attributes: { roles: ['editor'] } });
  ctx.viewer = await givenUser(ctx.t, 'dash-viewer', { attributes: { roles: ['viewerFull'] } });
  // An admin by role, but with only the access rights it is given: the object check still applies.
  ctx.reader = await givenUser(ctx.t, 'dash-reader', { attributes: { roles: ['admin'] } });
  const role = await ctx.t.call('POST', '/api/roles', { body: { name: 'dashboardDesigner', permissions: { dashboard: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'] } } });
  assert.is(role.status, 201, role.text);
  ctx.designer = await givenUser(ctx.t, 'dash-designer', { attributes: { roles: ['dashboardDesigner'] } });
});
access.after(async (ctx) => {
  await ctx.t.stop();
});

const text = TEMPLATES.text!.minimal;

async function share(t: TestPlatform, dashboardId: string, user: GivenUser, scope: string[]): Promise<void> {
  const res = await t.call('POST', '/api/access-rights', { body: { resourceType: 'dashboard', resourceId: dashboardId, subjectType: 'singleton', subjectId: user.id, scope } });
  assert.is(res.status, 201, res.text);
}

access('given an editor with write access, when it reads, moves, edits the header and replaces widget settings, then each succeeds', async ({ t, editor }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  await share(t, d._id, editor, ['write', 'read']);
  const as = { token: editor.token };
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`, as)).status, 200);
  assert.is((await t.call('PATCH', `/api/dashboards/${d._id}`, { ...as, body: { title: 'Edited', widgets: [{ _id: w._id, x: 2, y: 0, width: 7, height: 2 }] } })).status, 200);
  assert.is((await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { ...as, body: { template: 'text', settings: { ...text, text: 'Edited' } } })).status, 201);
});

access('given an editor with write access, when it creates, duplicates, adds or deletes, then 403 Forbidden from its role', async ({ t, editor }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  await share(t, d._id, editor, ['write', 'read']);
  const as = { token: editor.token };
  const attempts = [
    await t.call('POST', '/api/dashboards', { ...as, body: { name: 'Mine' } }),
    await t.call('POST', `/api/dashboards/${d._id}/duplicate`, as),
    await t.call('POST', `/api/dashboards/${d._id}/widgets`, { ...as, body: { template: 'text', settings: text } }),
    await t.call('POST', `/api/dashboards/${d._id}/widgets/${w._id}/duplicate`, as),
    await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`, as),
    await t.call('DELETE', `/api/dashboards/${d._id}`, as),
  ];
  for (const res of attempts) {
    assert.is(res.status, 403);
    assert.is(res.text, 'Forbidden');
  }
});

access('given a viewer with write access, when it does anything but GET, then 403 Forbidden', async ({ t, viewer }) => {
  const d = await givenDashboard(t);
  const w = await givenWidget(t, d._id, 'text');
  await share(t, d._id, viewer, ['admin', 'write', 'read']);
  const as = { token: viewer.token };
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`, as)).status, 200);
  for (const res of [
    await t.call('PATCH', `/api/dashboards/${d._id}`, { ...as, body: { name: 'x' } }),
    await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { ...as, body: { template: 'text', settings: text } }),
    await t.call('POST', '/api/dashboards', { ...as, body: { name: 'x' } }),
    await t.call('DELETE', `/api/dashboards/${d._id}`, as),
  ]) {
    assert.is(res.status, 403);
    assert.is(res.text, 'Forbidden');
  }
});

access('given a dashboard the caller cannot read, when it asks for or changes it, then 404, and the list leaves it out', async ({ t, editor, reader }) => {
  const d = await givenDashboard(t, { name: 'Secret' });
  const w = await givenWidget(t, d._id, 'text');
  for (const user of [editor, reader]) {
    const as = { token: user.token };
    assert.is((await t.call('GET', `/api/dashboards/${d._id}`, as)).status, 404);
    assert.is((await t.call('PATCH', `/api/dashboards/${d._id}`, { ...as, body: { name: 'x' } })).status, 404);
    assert.is((await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { ...as, body: { template: 'text', settings: text } })).status, 404);
    const list = await t.call('GET', '/api/dashboards', as);
    assert.is(list.status, 200);
    assert.not.ok(list.body.some((x: any) => x._id === d._id));
  }
  assert.is((await t.call('DELETE', `/api/dashboards/${d._id}`, { token: reader.token })).status, 404);
  assert.is((await t.call('POST', `/api/dashboards/${d._id}/duplicate`, { token: reader.token })).status, 404);
});

access('given a dashboard shared read-only, when the reader changes, adds, removes, duplicates or deletes, then 403, and it can still read and list it', async ({ t, reader }) => {
  const d = await givenDashboard(t, { name: 'Shared' });
  const w = await givenWidget(t, d._id, 'text');
  await share(t, d._id, reader, ['read']);
  const as = { token: reader.token };
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`, as)).status, 200);
  assert.ok((await t.call('GET', '/api/dashboards', as)).body.some((x: any) => x._id === d._id));
  for (const res of [
    await t.call('PATCH', `/api/dashboards/${d._id}`, { ...as, body: { name: 'x' } }),
    await t.call('PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { ...as, body: { template: 'text', settings: text } }),
    await t.call('POST', `/api/dashboards/${d._id}/widgets`, { ...as, body: { template: 'text', settings: text } }),
    await t.call('POST', `/api/dashboards/${d._id}/widgets/${w._id}/duplicate`, as),
    await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`, as),
    await t.call('POST', `/api/dashboards/${d._id}/duplicate`, as),
    await t.call('DELETE', `/api/dashboards/${d._id}`, as),
  ]) {
    assert.is(res.status, 403, res.text);
  }
  const after = (await t.call('GET', `/api/dashboards/${d._id}`)).body;
  assert.equal([after.name, after.widgets.length], ['Shared', 1]);
});

access('given a custom role that may POST dashboards, when its user creates one, then it has full access to it and others do not see it', async ({ t, designer, reader }) => {
  const mine = await givenDashboard(t, { name: 'Designed' }, designer.token);
  const as = { token: designer.token };
  assert.is((await t.call('GET', `/api/dashboards/${mine._id}`, as)).status, 200);
  assert.is((await t.call('POST', `/api/dashboards/${mine._id}/widgets`, { ...as, body: { template: 'text', settings: text } })).status, 201);
  const copy = await t.call('POST', `/api/dashboards/${mine._id}/duplicate`, as);
  assert.is(copy.status, 201);
  // The copy belongs to whoever made it.
  assert.is((await t.call('GET', `/api/dashboards/${copy.body._id}`, as)).status, 200);
  assert.is((await t.call('GET', `/api/dashboards/${mine._id}`, { token: reader.token })).status, 404);
  assert.is((await t.call('GET', `/api/dashboards/${mine._id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/dashboards/${mine._id}`, as)).status, 204);
});

access('given a dashboard shared with a usergroup, when a member reads it, then it is visible to the member', async ({ t, viewer }) => {
  const d = await givenDashboard(t, { name: 'Team board' });
  const group = await t.call('POST', '/api/usergroups', { body: { name: 'Team' } });
  assert.is(group.status, 201, group.text);
  assert.is((await t.call('POST', `/api/usergroups/${group.body._id}/members`, { body: { userId: viewer.id } })).status < 300, true);
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`, { token: viewer.token })).status, 404);
  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'dashboard', resourceId: d._id, subjectType: 'group', subjectId: group.body._id, scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`, { token: viewer.token })).status, 200);
});

access('given a dashboard with a widget on a real device, when it is shared read-only, then the user sees the dashboard but not the device', async ({ t, viewer }) => {
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'Boiler room sensor' } });
  assert.is(device.status, 201, device.text);
  const deviceId = device.body._id as string;
  const d = await givenDashboard(t, { name: 'Devices', widgets: [{ template: 'deviceValue', settings: { ...TEMPLATES.deviceValue!.minimal, deviceId } }] });
  await share(t, d._id, viewer, ['read']);
  const as = { token: viewer.token };
  const seen = await t.call('GET', `/api/dashboards/${d._id}`, as);
  assert.is(seen.status, 200, seen.text);
  assert.is(seen.body.widgets[0].settings.deviceId, deviceId);
  // The device exists and its owner sees it; the dashboard's reader does not.
  assert.is((await t.call('GET', `/api/iotnodes/${deviceId}`)).status, 200);
  assert.is((await t.call('GET', `/api/iotnodes/${deviceId}`, as)).status, 404);
  const list = await t.call('GET', '/api/iotnodes', as);
  assert.is(list.status, 200, list.text);
  assert.not.ok(list.body.some((x: any) => x._id === deviceId));
  assert.ok((await t.call('GET', '/api/iotnodes')).body.some((x: any) => x._id === deviceId));
});

access('given a designer who duplicates its dashboard, then the copy\'s DashboardCreated carries the designer as actor', async ({ t, designer }) => {
  const mine = await givenDashboard(t, { name: 'Mine', widgets: [{ template: 'text', settings: text }] }, designer.token);
  const copy = await t.call('POST', `/api/dashboards/${mine._id}/duplicate`, { token: designer.token });
  assert.is(copy.status, 201, copy.text);
  const [created] = await t.platform.deps.store.readStream(`dashboard-${copy.body._id}`);
  assert.is(created!.type, 'DashboardCreated');
  assert.is(created!.metadata.actor, designer.id);
  assert.is((created!.data as any).createdBy, designer.id);
});

access('given installer, viewerBasic, viewerStandard and viewerFull, when they do anything but GET on a dashboard they may write, then 403 Forbidden and nothing changes', async ({ t }) => {
  for (const role of ['installer', 'viewerBasic', 'viewerStandard', 'viewerFull']) {
    const user = await givenUser(t, `dash-${role.toLowerCase()}`, { attributes: { roles: [role] } });
    const d = await givenDashboard(t, { name: 'Shared' });
    const w = await givenWidget(t, d._id, 'text');
    await share(t, d._id, user, ['admin', 'write', 'read']);
    const as = { token: user.token };
    assert.is((await t.call('GET', `/api/dashboards/${d._id}`, as)).status, 200, role);
    for (const [method, path, body] of [
      ['POST', '/api/dashboards', { name: 'Mine' }],
      ['PATCH', `/api/dashboards/${d._id}`, { name: 'Renamed' }],
      ['PUT', `/api/dashboards/${d._id}/widgets/${w._id}`, { template: 'text', settings: { ...text, text: 'Changed' } }],
      ['DELETE', `/api/dashboards/${d._id}`, undefined],
    ] as const) {
      const res = await t.call(method, path, body === undefined ? as : { ...as, body });
      assert.is(res.status, 403, `${role} ${method} ${path}: ${res.status} ${res.text}`);
      assert.is(res.text, 'Forbidden');
    }
    const after = (await t.call('GET', `/api/dashboards/${d._id}`)).body;
    assert.equal([after.name, after.widgets[0].settings.text], ['Shared', text.text], role);
  }
});

access('given no token or a bad one, when a dashboard route is called, then 401', async ({ t }) => {
  const d = await givenDashboard(t);
  const [header, payload] = t.adminToken.split('.');
  const forged = `${header}.${payload}.${Buffer.from('not the signature').toString('base64url')}`;
  for (const token of [null, 'not-a-jwt', forged]) {
    for (const [method, path, body] of [
      ['GET', '/api/dashboards', undefined],
      ['GET', `/api/dashboards/${d._id}`, undefined],
      ['POST', '/api/dashboards', { name: 'Anonymous' }],
      ['POST', `/api/dashboards/${d._id}/widgets`, { template: 'text', settings: text }],
      ['DELETE', `/api/dashboards/${d._id}`, undefined],
    ] as const) {
      const res = await t.call(method, path, body === undefined ? { token } : { token, body });
      assert.is(res.status, 401, `${String(token).slice(0, 12)} ${method} ${path}: ${res.status}`);
    }
  }
  assert.is((await t.call('GET', `/api/dashboards/${d._id}`)).status, 200);
});

access('given a dashboard the caller cannot see, when it adds, deletes or duplicates a widget, then 404 and nothing changes', async ({ t, reader }) => {
  const d = await givenDashboard(t, { name: 'Hidden' });
  const w = await givenWidget(t, d._id, 'text');
  const as = { token: reader.token };
  for (const res of [
    await t.call('POST', `/api/dashboards/${d._id}/widgets`, { ...as, body: { template: 'text', settings: text } }),
    await t.call('DELETE', `/api/dashboards/${d._id}/widgets/${w._id}`, as),
    await t.call('POST', `/api/dashboards/${d._id}/widgets/${w._id}/duplicate`, as),
  ]) {
    assert.is(res.status, 404, res.text);
  }
  const after = (await t.call('GET', `/api/dashboards/${d._id}`)).body;
  assert.equal(after.widgets.map((x: any) => x._id), [w._id]);
});

access.run();
