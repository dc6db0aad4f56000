/**
 * Revisions: who changed a resource, when, in which request, and what
 * changed, oldest first.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { diff } from '../../domain/audit/diff.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { givenTranslator } from '../translators/given.js';

const unit = suite('diff');

unit('objects are compared key by key, lists of things with ids by id, other lists whole', () => {
  const before = { name: 'a', widgets: [{ _id: 'w1', x: 0, settings: { t: 1 } }, { _id: 'w2', x: 1 }], tags: ['x'] };
  const after = { name: 'b', widgets: [{ _id: 'w2', x: 1 }, { _id: 'w1', x: 0, settings: { t: 2 } }, { _id: 'w3', x: 2 }], tags: ['x', 'y'], extra: true };
  assert.equal(diff(before, after), [
    { path: '/name', before: 'a', after: 'b' },
    { path: '/widgets/w1/settings/t', before: 1, after: 2 },
    { path: '/widgets/w3', after: { _id: 'w3', x: 2 } },
    { path: '/tags', before: ['x'], after: ['x', 'y'] },
    { path: '/extra', after: true },
  ]);
  assert.equal(diff({ 'a/b': 1, 'c~d': 1 }, {}), [{ path: '/a~1b', before: 1 }, { path: '/c~0d', before: 1 }], 'JSON Pointer escapes');
  assert.equal(diff(undefined, { a: 1 }), [{ path: '/a', after: 1 }], 'a creation adds every field');
  assert.equal(diff({ a: 1 }, { a: 1 }), []);
});

unit.run();

interface Ctx {
  t: TestPlatform;
  ann: GivenUser;
}

const revisions = suite<Ctx>('revisions');

revisions.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ann = await givenUser(ctx.t, 'ann-revisions');
});
revisions.after(async ({ t }) => t.stop());

/** A write that must succeed; returns its body and its request id (the events' correlation id). */
async function write(t: TestPlatform, method: string, path: string, body?: unknown) {
  const res = await t.call(method, path, body === undefined ? {} : { body });
  assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
  return { body: res.body, request: res.headers.get('x-request-id')! };
}

const adminIdOf = async (t: TestPlatform) => (await t.platform.deps.db.selectFrom('users').select('id').where('username', '=', 'admin').executeTakeFirstOrThrow()).id;

revisions('given a dashboard edited several times, when its revisions are read, then each change is there oldest first, with its actor, request and what it changed', async ({ t, ann }) => {
  const text = { text: 'Hello', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' };
  const created = await write(t, 'POST', '/api/dashboards', { name: 'Line 1', widgets: [{ template: 'text', settings: text }] });
  const id = created.body._id as string;
  const widget = created.body.widgets[0]._id as string;
  const added = await write(t, 'POST', `/api/dashboards/${id}/widgets`, { template: 'text', settings: { ...text, text: 'Two' } });
  const replaced = await write(t, 'PUT', `/api/dashboards/${id}/widgets/${widget}`, { template: 'text', settings: { ...text, text: 'Hi' } });
  const renamed = await write(t, 'PATCH', `/api/dashboards/${id}`, { name: 'Line one', title: 'The first line' });
  const removed = await write(t, 'DELETE', `/api/dashboards/${id}/widgets/${added.body._id}`);

  const res = await t.call('GET', `/api/dashboards/${id}/revisions`);
  assert.is(res.status, 200, res.text);
  const list = res.body as any[];
  assert.equal(list.map((r) => r.type), ['DashboardCreated', 'WidgetAdded', 'WidgetSettingsReplaced', 'DashboardHeaderChanged', 'WidgetDeleted']);
  assert.equal(list.map((r) => r.correlationId), [created, added, replaced, renamed, removed].map((w) => w.request));
  const admin = await adminIdOf(t);
  assert.ok(list.every((r) => r.actor === admin));
  assert.equal(list.map((r) => r.time), [...list.map((r) => r.time)].sort(), 'oldest first');
  assert.ok(list[0].changes.some((c: any) => c.path === '/name' && c.after === 'Line 1' && !('before' in c)));
  assert.ok(list[0].changes.some((c: any) => c.path === '/widgets' && c.after[0]._id === widget));
  assert.equal(list[1].changes.map((c: any) => c.path), [`/widgets/${added.body._id}`]);
  assert.equal(list[2].changes, [{ path: `/widgets/${widget}/settings/text`, before: 'Hello', after: 'Hi' }]);
  assert.equal(list[3].changes, [{ path: '/name', before: 'Line 1', after: 'Line one' }, { path: '/title', after: 'The first line' }]);
  assert.equal(list[4].changes.map((c: any) => [c.path, 'after' in c]), [[`/widgets/${added.body._id}`, false]]);

  assert.is((await t.call('GET', `/api/dashboards/${id}/revisions`, { token: ann.token })).status, 404, 'not for who cannot read it');
});

revisions('given an iotnode updated and reporting, when its revisions are read, then its changes are there and its reports are not', async ({ t }) => {
  const created = await write(t, 'POST', '/api/iotnodes', { name: 'pump', category: 'water', site: 'north' });
  const id = created.body._id as string;
  await write(t, 'POST', `/api/iotnodes/${id}/uplinks`, { encodedData: { hexEncoded: '01', port: 1 }, flow: 3 });
  const updated = await write(t, 'PUT', `/api/iotnodes/${id}`, { name: 'pump 2', site: null });
  await write(t, 'POST', `/api/iotnodes/${id}/uplinks`, { encodedData: { hexEncoded: '02', port: 1 }, flow: 4 });

  const list = (await t.call('GET', `/api/iotnodes/${id}/revisions`)).body as any[];
  assert.equal(list.map((r) => r.type), ['DeviceRegistered', 'DeviceUpdated']);
  assert.is(list[1].correlationId, updated.request);
  const changes = Object.fromEntries(list[1].changes.map((c: any) => [c.path, c]));
  assert.equal(changes['/name'], { path: '/name', before: 'pump', after: 'pump 2' });
  assert.equal(changes['/site'], { path: '/site', before: 'north' });
  assert.ok(changes['/updatedAt'], 'the update moved updatedAt');
  assert.not.ok(changes['/flow'] || changes['/encodedData'], 'a report between is not this change\'s');
  assert.ok(list[0].changes.some((c: any) => c.path === '/_id' && c.after === id));
});

revisions('given a geofence replaced, when its revisions are read, then the fence\'s change is there', async ({ t }) => {
  const ring = (d: number) => ({ type: 'Polygon', coordinates: [[[4.8, 52.3], [4.8 + d, 52.3], [4.8 + d, 52.3 + d], [4.8, 52.3]]] });
  const created = await write(t, 'POST', '/api/geofences', { fence: ring(0.1) });
  const id = created.body._id as string;
  await write(t, 'PUT', `/api/geofences/${id}`, { fence: ring(0.2) });
  const list = (await t.call('GET', `/api/geofences/${id}/revisions`)).body as any[];
  assert.equal(list.map((r) => r.type), ['GeofenceCreated', 'GeofenceReplaced']);
  assert.equal(list[1].changes.map((c: any) => c.path).sort(), ['/fence/coordinates', '/updatedAt']);
  assert.equal(list[1].changes.find((c: any) => c.path === '/fence/coordinates').after, ring(0.2).coordinates);
});

revisions('given translator versions uploaded and deleted, when the revisions of one version are read, then every version of its name is there', async ({ t }) => {
  const one = await givenTranslator(t, { name: 'rev-climate', version: '1.0.0' });
  await givenTranslator(t, { name: 'rev-climate', version: '1.1.0' });
  const two = await givenTranslator(t, { name: 'rev-climate', version: '1.2.0' });
  assert.is((await t.call('DELETE', `/api/translators/${one._id}`)).status, 204);
  const list = (await t.call('GET', `/api/translators/${two._id}/revisions`)).body as any[];
  assert.equal(list.map((r) => [r.type, r.changes.map((c: any) => c.path)]), [
    ['TranslatorUploaded', ['/versions/1.0.0']],
    ['TranslatorUploaded', ['/versions/1.1.0']],
    ['TranslatorUploaded', ['/versions/1.2.0']],
    ['TranslatorDeleted', ['/versions/1.0.0']],
  ]);
  assert.equal(list[2].changes[0].after, (await t.call('GET', `/api/translators/${two._id}`)).body, 'each version as GET shows it');
  assert.is((await t.call('GET', `/api/translators/${one._id}/revisions`)).status, 404, 'a deleted version is gone');
});

revisions('given rights given and taken on a resource, when its rights\' revisions are read, then they end where the rights are, and need admin scope', async ({ t, ann }) => {
  const d = (await write(t, 'POST', '/api/dashboards', { name: 'Shared' })).body;
  const base = { resourceType: 'dashboard', resourceId: d._id, subjectType: 'singleton', subjectId: ann.id };
  await write(t, 'POST', '/api/access-rights', { ...base, scope: ['read', 'write'] });
  await write(t, 'DELETE', '/api/access-rights', { ...base, scope: ['write'] });
  await write(t, 'POST', '/api/access-rights', { ...base, subjectType: 'orgUnit', subjectId: 'plant', scope: ['peek'] });
  const admin = await adminIdOf(t);

  const res = await t.call('GET', `/api/access-rights/resource/${d._id}/revisions`);
  assert.is(res.status, 200, res.text);
  const list = res.body as any[];
  assert.equal(list.map((r) => r.type), ['DashboardCreated', 'AccessGranted', 'AccessRevoked', 'AccessGranted']);
  assert.equal(list[0].changes, [{ path: `/user:${admin}`, after: { scope: ['admin', 'write', 'read', 'peek'] } }]);
  assert.equal(list[1].changes, [{ path: `/user:${ann.id}`, after: { scope: ['write', 'read'] } }]);
  assert.equal(list[2].changes, [{ path: `/user:${ann.id}/scope`, before: ['write', 'read'], after: ['read'] }]);

  // Folding every revision's changes gives the rights as they are.
  const rights: Record<string, string[]> = {};
  for (const r of list) for (const c of r.changes) {
    const [key, field] = c.path.slice(1).split('/');
    if (field) rights[key] = c.after;
    else if ('after' in c) rights[key] = c.after.scope;
    else delete rights[key];
  }
  const now = (await t.call('GET', `/api/access-rights/resource/${d._id}`)).body as any[];
  assert.equal(rights, Object.fromEntries(now.map((r) => [`${r.subjectType === 'singleton' ? 'user' : r.subjectType}:${r.subjectId}`, r.scope])));

  assert.is((await t.call('GET', `/api/access-rights/resource/${d._id}/revisions`, { token: ann.token })).status, 403, 'read without admin scope');
});

revisions('given a rule replaced and deleted, when its revisions are read, then each change is there with its request, nodes named by id, and its runs are not', async ({ t, ann }) => {
  const trigger = { id: 'press', type: 'trigger', config: { resourceType: 'button' } };
  const note = (message: string) => ({ id: 'note', type: 'action', config: { action: 'log', message } });
  const created = await write(t, 'POST', '/api/rules-v2', { name: 'boiler', definition: { nodes: [trigger, note('pressed')], edges: [{ from: 'press', to: 'note' }] } });
  const id = created.body._id as string;
  await write(t, 'POST', `/api/rules-v2/${id}/execute`, { triggerNodeId: 'press' });
  const replaced = await write(t, 'PUT', `/api/rules-v2/${id}`, { name: 'boiler', definition: { nodes: [trigger, note('pressed again')], edges: [{ from: 'press', to: 'note' }] } });
  const res = await t.call('GET', `/api/rules-v2/${id}/revisions`);
  assert.is(res.status, 200, res.text);
  const list = res.body as any[];
  assert.equal(list.map((r) => r.type), ['RuleCreated', 'RuleReplaced'], 'the run is not a change of the rule');
  assert.equal(list.map((r) => r.correlationId), [created.request, replaced.request]);
  assert.is(list[0].actor, await adminIdOf(t));
  assert.equal(list[1].changes, [{ path: '/definition/nodes/note/config/message', before: 'pressed', after: 'pressed again' }]);
  assert.is((await t.call('GET', `/api/rules-v2/${id}/revisions`, { token: ann.token })).status, 404, 'a rule the caller cannot read');

  await write(t, 'DELETE', `/api/rules-v2/${id}`);
  const audit = await t.call('GET', `/api/audit/events?resourceType=ruleV2&resourceId=${id}`);
  assert.ok(audit.body.events.some((e: any) => e.type === 'RuleRunStarted'), 'its runs are in the audit log under the rule');
  assert.equal(audit.body.events.filter((e: any) => e.streamId === `rule-${id}`).map((e: any) => e.type), ['RuleCreated', 'RuleReplaced', 'RuleDeleted']);
});

revisions.run();
