import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { errorHandler } from '../../api/errors.js';
import express from 'express';
import { panelRoutes } from '../../api/web.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { ensurePanelBuilt } from '../support/browser.js';
import { firstLoad } from '../../web/firstLoad.js';
import { givenUser, ok } from './support.js';

/** The panel as the platform serves it, and the API it added for every client. */
const server = suite<{ t: TestPlatform }>('control panel: serving and its API');

server.before(async (ctx) => {
  ensurePanelBuilt();
  ctx.t = await startTestPlatform();
});
server.after(async (ctx) => {
  await ctx.t?.stop();
});

server('when / or a page path is asked for without a token, then the panel page comes back with its security policy, while /api stays closed', async ({ t }) => {
  for (const path of ['/', '/dashboards/0123456789abcdef01234567', '/devices']) {
    const res = await t.call('GET', path, { token: null });
    assert.is(res.status, 200, path);
    assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(res.text, /<div id="root">/);
    assert.match(res.headers.get('content-security-policy') ?? '', /script-src 'self'/);
    assert.is(res.headers.get('cache-control'), 'no-cache');
  }
  assert.is((await t.call('GET', '/api/dashboards', { token: null })).status, 401);
  assert.is((await t.call('GET', '/api/no-such-thing')).status, 404);
  assert.is((await t.call('GET', '/assets/no-such-file.js', { token: null })).status, 404);
  // No operation of the document is POST /: refused before any authentication.
  assert.is((await t.call('POST', '/', { token: null, body: {} })).status, 404);
});

server('when a panel page is served, then its policy lets it connect and send forms only to its own origin', async ({ t }) => {
  const res = await t.call('GET', '/devices', { token: null });
  const directives = new Map((res.headers.get('content-security-policy') ?? '').split(';').map((d) => {
    const [name, ...values] = d.trim().split(/\s+/);
    return [name!, values.join(' ')] as const;
  }));
  // 'self' alone: REST and the MQTT WebSocket at /mqtt are same-origin, and no other host is reachable from a script.
  assert.is(directives.get('connect-src'), "'self'");
  assert.is(directives.get('form-action'), "'self'");
  assert.is(directives.get('script-src'), "'self'");
  assert.is(directives.get('frame-ancestors'), "'none'");
});

server('when an asset is asked for before its file exists, then nothing of the request is kept: once the file is there it is served, gzipped', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'panel-'));
  mkdirSync(join(dir, 'assets'));
  const app = express().use(panelRoutes(dir)).use(errorHandler);
  const server = app.listen(0, '127.0.0.1');
  await new Promise((r) => server.once('listening', r));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  // fetch decodes the gzip; its header tells what was sent.
  const get = (path: string) => fetch(`${base}${path}`, { headers: { 'accept-encoding': 'gzip' } });
  try {
    assert.is((await get('/assets/late-1a2b.js')).status, 404);
    writeFileSync(join(dir, 'assets', 'late-1a2b.js'), 'console.log("late");');
    const res = await get('/assets/late-1a2b.js');
    assert.is(res.status, 200);
    assert.is(res.headers.get('content-encoding'), 'gzip');
    assert.is(await res.text(), 'console.log("late");');
    // And the gzip is kept: the file's later change is not seen (hashed assets never change).
    writeFileSync(join(dir, 'assets', 'late-1a2b.js'), 'changed');
    assert.is(await (await get('/assets/late-1a2b.js')).text(), 'console.log("late");');
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

server('when a hashed asset is fetched, then it is cached for a year', async ({ t }) => {
  const page = await t.call('GET', '/', { token: null });
  const script = /src="(\/assets\/[^"]+\.js)"/.exec(page.text)![1]!;
  const res = await t.call('GET', script, { token: null });
  assert.is(res.status, 200);
  assert.match(res.headers.get('cache-control') ?? '', /immutable/);
});

server('the JavaScript of a first load stays under 400 KB gzipped', () => {
  const { gzipBytes, files } = firstLoad(join(new URL('../../web/dist', import.meta.url).pathname));
  console.log(`first-load JavaScript: ${(gzipBytes / 1024).toFixed(1)} KB gzipped in ${files.length} files`);
  assert.ok(gzipBytes < 400 * 1024, `${gzipBytes} bytes`);
});

server('given a viewer, when it adds devices to its live channel, then only the readable ones join, the channel has the viewer as recipient, and a second call reuses it', async ({ t }) => {
  const viewer = await givenUser(t, 'live-viewer', ['viewerBasic']);
  const [a, b] = [await ok(t, 'POST', '/api/iotnodes', { name: 'readable' }), await ok(t, 'POST', '/api/iotnodes', { name: 'hidden' })];
  await ok(t, 'POST', '/api/access-rights', { resourceType: 'device', resourceId: a._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] });
  assert.is((await t.call('GET', '/api/live-channel', { token: viewer.token })).status, 404);
  const first = await t.call('POST', '/api/live-channel/devices', { token: viewer.token, body: { devices: [a._id, b._id] } });
  assert.is(first.status, 201, first.text);
  assert.equal(first.body.devices, [a._id]);
  assert.equal(first.body.refused, [b._id]);
  assert.is(first.body.topic, `svc/output/v2/${viewer.id}/iotnode/+`);
  const channel = await ok(t, 'GET', `/api/channels/${first.body.channelId}`, undefined, viewer.token);
  assert.equal(channel.mqtt, { type: 'keycloakUser', recipient: viewer.id });
  assert.is(channel.deviceGroup, first.body.deviceGroupId);
  const again = await t.call('POST', '/api/live-channel/devices', { token: viewer.token, body: { devices: [a._id] } });
  assert.is(again.status, 200);
  assert.is(again.body.channelId, first.body.channelId);
  assert.equal(again.body.devices, [a._id]);
  assert.equal((await ok(t, 'GET', '/api/live-channel', undefined, viewer.token)).channelId, first.body.channelId);
  // Another user's live channel is their own.
  assert.is((await t.call('GET', '/api/live-channel')).status, 404);
});

server('given a live device group left without its channel (a stop between the two writes), when devices are added, then that group gets its channel and nothing is duplicated', async ({ t }) => {
  const group = await ok(t, 'POST', '/api/devicegroups', { name: 'live data (control panel)' });
  assert.is((await t.call('GET', '/api/live-channel')).status, 404);
  const device = await ok(t, 'POST', '/api/iotnodes', { name: 'watched' });
  const first = await t.call('POST', '/api/live-channel/devices', { body: { devices: [device._id] } });
  assert.is(first.status, 201, first.text);
  assert.is(first.body.deviceGroupId, group._id);
  assert.equal(first.body.devices, [device._id]);
  const again = await ok(t, 'POST', '/api/live-channel/devices', { devices: [device._id] });
  assert.equal([again.deviceGroupId, again.channelId], [group._id, first.body.channelId]);
  assert.is((await ok(t, 'GET', '/api/devicegroups')).filter((g: any) => g.name === 'live data (control panel)').length, 1);
  assert.is((await ok(t, 'GET', '/api/channels')).filter((c: any) => c.name === 'live data (control panel)').length, 1);
});

server('when the live-channel body is bad, then 422 names the field and nothing is created', async ({ t }) => {
  const viewer = await givenUser(t, 'bad-live', ['viewerBasic']);
  const res = await t.call('POST', '/api/live-channel/devices', { token: viewer.token, body: { devices: ['not-an-id'] } });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - devices\.0 /);
  assert.is((await t.call('GET', '/api/live-channel', { token: viewer.token })).status, 404);
});

server('when a user asks for its scopes on a dashboard, then it gets what it holds, and 404 for one it cannot read', async ({ t }) => {
  const viewer = await givenUser(t, 'scope-viewer', ['viewerBasic']);
  const d = await ok(t, 'POST', '/api/dashboards', { name: 'Scoped' });
  assert.equal((await ok(t, 'GET', `/api/access-rights/resource/${d._id}/mine`)).scope.includes('write'), true);
  assert.is((await t.call('GET', `/api/access-rights/resource/${d._id}/mine`, { token: viewer.token })).status, 404);
  await ok(t, 'POST', '/api/access-rights', { resourceType: 'dashboard', resourceId: d._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] });
  assert.equal(await ok(t, 'GET', `/api/access-rights/resource/${d._id}/mine`, undefined, viewer.token), { resourceId: d._id, scope: ['read'] });
});

server('the grid sizes in the document are the ones the platform places widgets with', async ({ t }) => {
  const { TEMPLATES } = await import('../../domain/dashboards/templates.js');
  const doc = await ok(t, 'GET', '/api/openapi.json');
  const sizes = doc.components.schemas.WidgetTemplate['x-grid-sizes'];
  assert.equal(Object.keys(sizes).sort(), Object.keys(TEMPLATES).sort());
  for (const [name, t2] of Object.entries(TEMPLATES)) assert.equal(sizes[name], { default: [...t2.size], min: [...t2.min] }, name);
});

server('when a translator version runs on devices, then GET /api/translators/{id}/devices lists the readable ones', async ({ t }) => {
  const tr = await ok(t, 'POST', '/api/translators', { name: 'probe-x', version: '1.0.0', match: { deviceModelName: 'probe-x-1' }, spec: { temperature: { type: 'number', unit: '°C', quantity: 'temperature' } }, code: 'function translate() { return {}; }' });
  assert.equal(await ok(t, 'GET', `/api/translators/${tr._id}/devices`), []);
  const d = await ok(t, 'POST', '/api/iotnodes', { name: 'probe device', deviceModelName: 'probe-x-1' });
  assert.equal(await ok(t, 'GET', `/api/translators/${tr._id}/devices`), [{ _id: d._id, name: 'probe device' }]);
  assert.is((await t.call('GET', '/api/translators/0123456789abcdef01234567/devices')).status, 404);
});

server.run();
