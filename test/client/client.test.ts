/**
 * The typed REST client (`client/`): generated from the OpenAPI document and
 * committed, so this fails while the committed types are stale; and a part of
 * the REST suite run through it, every JSON answer checked against the
 * document's response schema (`test/support/client.ts`), while `tsc` checks
 * every request and every field read against the same document.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { platformClient } from '../../client/index.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { checkedAnswers, typedClient } from '../support/client.js';
import { ADMIN } from '../support/platform.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

const generated = suite('generated client');

generated('when the client is generated again from api/openapi.yaml, then it is the one committed (otherwise: npm run generate:client)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'client-'));
  try {
    const out = join(dir, 'schema.d.ts');
    // The very command of `npm run generate:client`, writing elsewhere.
    const [command, ...args] = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')).scripts['generate:client'] as string).split(/\s+/);
    const output = args.indexOf('--output');
    assert.ok(command === 'openapi-typescript' && output > 0, 'generate:client runs openapi-typescript with --output');
    args[output + 1] = out;
    await promisify(execFile)(join(repo, 'node_modules/.bin', command!), args, { cwd: repo, timeout: 60_000 });
    const fresh = readFileSync(out, 'utf8');
    const committed = readFileSync(join(repo, 'client/schema.d.ts'), 'utf8');
    assert.ok(fresh.includes('"/api/audit/events"'), 'the generator read the document');
    assert.ok(fresh === committed, 'client/schema.d.ts is stale: run `npm run generate:client` and commit it');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

generated.run();

const rest = suite<{ t: TestPlatform }>('REST through the typed client');

rest.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
rest.after(async ({ t }) => t.stop());

rest('when a client logs in and works with dashboards, then every answer is the one the document describes', async ({ t }) => {
  const login = await platformClient(t.baseUrl).POST('/api/auth/local', { body: { username: ADMIN.username, password: ADMIN.password } });
  assert.is(login.response.status, 200);
  const api = typedClient(t, login.data!.token);

  const created = await api.POST('/api/dashboards', { body: { name: 'Typed', widgets: [{ template: 'map', settings: {} }] } });
  assert.is(created.response.status, 201);
  const dashboardId = created.data!._id;
  const since = new Date().toISOString();
  await new Promise((r) => setTimeout(r, 5));
  const patched = await api.PATCH('/api/dashboards/{dashboardId}', { params: { path: { dashboardId } }, body: { title: 'Typed client' } });
  assert.is(patched.data!.title, 'Typed client');
  const read = await api.GET('/api/dashboards/{dashboardId}', { params: { path: { dashboardId } } });
  assert.is(read.data!.widgets[0]!.template, 'map');
  const then = await api.GET('/api/dashboards/{dashboardId}', { params: { path: { dashboardId }, query: { at: since } } });
  assert.is(then.data!.title, undefined, 'as it was before the title');
  const revisions = await api.GET('/api/dashboards/{dashboardId}/revisions', { params: { path: { dashboardId } } });
  assert.equal(revisions.data!.map((r) => r.type), ['DashboardCreated', 'DashboardHeaderChanged']);
  const list = await api.GET('/api/dashboards');
  assert.ok(list.data!.some((d) => d._id === dashboardId));
  const missing = await api.GET('/api/dashboards/{dashboardId}', { params: { path: { dashboardId: '000000000000000000000000' } } });
  assert.is(missing.response.status, 404);
  assert.is(missing.data, undefined);
});

rest('when a client works with iotnodes, geofences and their history, then every answer is the one the document describes', async ({ t }) => {
  const api = typedClient(t);
  const device = await api.POST('/api/iotnodes', { body: { name: 'typed sensor', lnglat: { type: 'Point', coordinates: [4.85, 52.35] } } });
  const id = device.data!._id as string;
  await api.POST('/api/iotnodes/{id}/uplinks', { params: { path: { id } }, body: { encodedData: { hexEncoded: '01', port: 1 } } });
  assert.is((await api.GET('/api/iotnodes/{id}', { params: { path: { id } } })).data!.name, 'typed sensor');
  assert.is((await api.GET('/api/iotnodes/{id}', { params: { path: { id }, query: { at: new Date().toISOString() } } })).response.status, 200);
  assert.equal((await api.GET('/api/iotnodes/{id}/revisions', { params: { path: { id } } })).data!.map((r) => r.type), ['DeviceRegistered']);
  assert.ok((await api.GET('/api/iotnodes', { params: { query: { limit: 10 } } })).data!.length >= 1);

  const fence = await api.POST('/api/geofences', { body: { fence: { type: 'Polygon', coordinates: [[[4.8, 52.3], [4.9, 52.3], [4.9, 52.4], [4.8, 52.3]]] } } });
  const fenceId = fence.data!._id;
  assert.is((await api.GET('/api/geofences/{id}', { params: { path: { id: fenceId } } })).data!.ref, null);
  assert.is((await api.GET('/api/geofences/{id}/revisions', { params: { path: { id: fenceId } } })).data!.length, 1);
  const rights = await api.GET('/api/access-rights/resource/{id}', { params: { path: { id: fenceId } } });
  assert.is(rights.data![0]!.subjectType, 'singleton');
  assert.is((await api.GET('/api/access-rights/resource/{id}/revisions', { params: { path: { id: fenceId } } })).data![0]!.type, 'GeofenceCreated');
  assert.ok(Array.isArray((await api.GET('/api/logs', { params: { query: { resourceId: id } } })).data!.logs));
});

rest('when a client pages through the audit log, then every page is the one the document describes', async ({ t }) => {
  const api = typedClient(t);
  const whole = await api.GET('/api/audit/events', { params: { query: { limit: 1000 } } });
  assert.is(whole.data!.nextCursor, undefined, 'one page holds them all');
  let cursor: string | undefined;
  const paged: string[] = [];
  let pages = 0;
  do {
    const page = await api.GET('/api/audit/events', { params: { query: { limit: 3, ...(cursor ? { cursor } : {}) } } });
    assert.is(page.response.status, 200);
    paged.push(...page.data!.events.map((e) => e.position));
    cursor = page.data!.nextCursor;
    pages++;
  } while (cursor);
  assert.ok(pages >= 3, `pages read: ${pages}`);
  assert.equal(paged, whole.data!.events.map((e) => e.position), 'the pages together are the whole log, in order');
  const health = await api.GET('/api/health');
  assert.is(health.data!.status, 'ok');
  assert.ok(checkedAnswers.size >= 15, `answers checked: ${[...checkedAnswers].join(', ')}`);
});

rest.run();
