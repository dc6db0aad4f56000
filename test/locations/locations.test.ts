import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type Response, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { assertNothingWritten } from '../security/given.js';
import { loadOpenApi } from '../../api/openapi.js';

const test = suite<{ t: TestPlatform; device: string; ann: GivenUser; bob: GivenUser }>('locations (deprecated)');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'Thermometer' } });
  assert.is(device.status, 201, device.text);
  ctx.device = device.body._id;
  // Ann may create locations (a custom role), and cannot read the admin's device; Bob is a plain viewer.
  assert.is((await ctx.t.call('POST', '/api/roles', { body: { name: 'placer', permissions: { location: ['GET', 'POST', 'PUT', 'DELETE'], device: ['GET', 'POST'] } } })).status, 201);
  ctx.ann = await givenUser(ctx.t, 'ann', { attributes: { roles: ['placer'] } });
  ctx.bob = await givenUser(ctx.t, 'bob');
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

const body = (device: string, extra: Record<string, unknown> = {}) => ({
  name: 'Kontor Östra',
  description: 'Head office',
  lat: 59.33,
  lng: 18.06,
  icon: 'building',
  defaultLayer: { name: 'Plan 1', image: '/images/plan1.png', left: 0, top: 100, width: 50, height: 200, items: [{ deviceId: device, type: 'sensor', size: 2, top: 10, left: 20, valueDisplay: 'temperature', locationItemControl: { icon: 'thermo' } }] },
  layers: [{ name: 'Källare_1-A', items: [] }],
  version: 3,
  ...extra,
});

const deprecated = (res: Response) => {
  assert.match(res.headers.get('deprecation') ?? '', /^@\d+$/, `Deprecation header on ${res.status}`);
  assert.match(res.headers.get('link') ?? '', /rel="deprecation"/);
};

test('given the model, when a location is created, read, listed, replaced and deleted, then each answer is deprecated and shows the location', async ({ t, device }) => {
  const created = await t.call('POST', '/api/locations', { body: body(device) });
  assert.is(created.status, 201, created.text);
  deprecated(created);
  const admin = (await t.call('GET', '/api/users?username=admin')).body[0].id;
  assert.is(created.body.user, admin, 'user is the caller when left out');
  assert.match(created.body._id, /^[0-9a-f]{24}$/);
  assert.equal(created.body.defaultLayer.items[0].locationItemControl, { icon: 'thermo' });
  assert.is(created.body.layers[0].name, 'Källare_1-A');

  const read = await t.call('GET', `/api/locations/${created.body._id}`);
  assert.is(read.status, 200);
  deprecated(read);
  assert.equal(read.body, created.body);

  // A read location can be sent back as it is, changed.
  const replaced = await t.call('PUT', `/api/locations/${created.body._id}`, { body: { ...read.body, name: 'Lager 2', layers: [] } });
  assert.is(replaced.status, 200, replaced.text);
  deprecated(replaced);
  assert.is(replaced.body.name, 'Lager 2');
  assert.is(replaced.body.user, admin, 'the user stays');
  assert.equal(replaced.body.layers, []);

  const list = await t.call('GET', '/api/locations');
  deprecated(list);
  assert.ok(list.body.some((l: { _id: string }) => l._id === created.body._id));

  const deleted = await t.call('DELETE', `/api/locations/${created.body._id}`);
  assert.is(deleted.status, 204);
  deprecated(deleted);
  const gone = await t.call('GET', `/api/locations/${created.body._id}`);
  assert.is(gone.status, 404);
  deprecated(gone);
});

test('when the OpenAPI document is read, then every locations operation is marked deprecated with the date the header gives', async ({ t }) => {
  const doc = loadOpenApi();
  const ops = Object.entries(doc.paths)
    .filter(([path]) => path.startsWith('/api/locations'))
    .flatMap(([, item]) => Object.entries(item).filter(([m]) => ['get', 'post', 'put', 'delete', 'patch'].includes(m)).map(([, op]) => op as Record<string, unknown>));
  assert.is(ops.length, 5);
  for (const op of ops) {
    assert.is(op.deprecated, true);
    assert.is(op['x-deprecated-since'], '2025-01-01');
  }
  const res = await t.call('GET', '/api/locations');
  assert.is(res.headers.get('deprecation'), `@${Date.parse('2025-01-01T00:00:00Z') / 1000}`);
  assert.is((await t.call('GET', '/api/iotnodes')).headers.get('deprecation'), null, 'other operations are not deprecated');
});

test('when a name has characters outside letters, digits, åäöÅÄÖ, spaces, underscores and hyphens, then 422 "is not a valid location name" and nothing is written', async ({ t, device }) => {
  for (const name of ['Café', 'Room/1', 'a.b', 'x!', '', 'Straße', '<script>']) {
    const res = await t.call('POST', '/api/locations', { body: body(device, { name }) });
    assert.is(res.status, 422, `${name}: ${res.text}`);
    assert.match(res.text, /^ERR - name is not a valid location name/);
    deprecated(res);
    await assertNothingWritten(t, res);
  }
  const layer = await t.call('POST', '/api/locations', { body: body(device, { layers: [{ name: 'ok' }, { name: 'Plan #2' }] }) });
  assert.is(layer.status, 422);
  assert.match(layer.text, /^ERR - layers\.1\.name is not a valid location name/);
  await assertNothingWritten(t, layer);
  for (const name of ['ÅÄÖ åäö', 'a_b-c 9']) assert.is((await t.call('POST', '/api/locations', { body: body(device, { name }) })).status, 201, name);
});

test('when a layer is outside 0–100 (left, top) or 50–200 (width, height), then 422 naming it and nothing is written; the bounds themselves pass', async ({ t, device }) => {
  for (const [key, value] of [['left', -0.1], ['left', 101], ['top', -5], ['top', 100.01], ['width', 49.9], ['width', 201], ['height', 0], ['height', 1000]] as const) {
    const res = await t.call('POST', '/api/locations', { body: body(device, { defaultLayer: { name: 'L', [key]: value } }) });
    assert.is(res.status, 422, `${key}=${value}: ${res.text}`);
    assert.match(res.text, new RegExp(`^ERR - defaultLayer\\.${key} `));
    await assertNothingWritten(t, res);
  }
  const inner = await t.call('POST', '/api/locations', { body: body(device, { layers: [{ name: 'ok', width: 250 }] }) });
  assert.match(inner.text, /^ERR - layers\.0\.width /);
  for (const layer of [{ left: 0, top: 0, width: 50, height: 50 }, { left: 100, top: 100, width: 200, height: 200 }]) {
    assert.is((await t.call('POST', '/api/locations', { body: body(device, { defaultLayer: layer }) })).status, 201);
  }
});

test('when an item has no deviceId, or a device the caller cannot read, then 422 naming the item and nothing is written', async ({ t, device, ann }) => {
  const missing = await t.call('POST', '/api/locations', { body: body(device, { defaultLayer: { items: [{ top: 1 }] } }) });
  assert.is(missing.status, 422);
  assert.match(missing.text, /^ERR - defaultLayer\.items\.0\.deviceId is required/);
  await assertNothingWritten(t, missing);
  const hidden = await t.call('POST', '/api/locations', { token: ann.token, body: body(device) });
  assert.is(hidden.status, 422, hidden.text);
  assert.is(hidden.text, 'ERR - defaultLayer.items.0.deviceId is not an iotnode you can read');
  await assertNothingWritten(t, hidden);
  const unknown = await t.call('POST', '/api/locations', { body: body(device, { layers: [{ items: [{ deviceId: 'cccccccccccccccccccccccc' }] }] }) });
  assert.is(unknown.text, 'ERR - layers.0.items.0.deviceId is not an iotnode you can read');
});

test('when a caller names another user, then 422; a platform admin may name an existing user', async ({ t, device, ann, bob }) => {
  const own = await t.call('POST', '/api/iotnodes', { token: ann.token, body: { name: 'Ann sensor' } });
  const anns = body(own.body._id);
  const other = await t.call('POST', '/api/locations', { token: ann.token, body: { ...anns, user: bob.id } });
  assert.is(other.status, 422);
  assert.match(other.text, /^ERR - user must be your own user id/);
  await assertNothingWritten(t, other);
  const self = await t.call('POST', '/api/locations', { token: ann.token, body: { ...anns, user: ann.id.toUpperCase() } });
  assert.is(self.status, 201, self.text);
  assert.is(self.body.user, ann.id);
  const byAdmin = await t.call('POST', '/api/locations', { body: body(device, { user: bob.id }) });
  assert.is(byAdmin.status, 201);
  assert.is(byAdmin.body.user, bob.id);
  assert.is((await t.call('POST', '/api/locations', { body: body(device, { user: '00000000-0000-4000-8000-000000000000' }) })).status, 422);
});

test('when a location is too big (51 layers, 1,001 items on a layer, a body over 1 MiB), then 422 or 413 and nothing is written', async ({ t, device }) => {
  const layers = await t.call('POST', '/api/locations', { body: body(device, { layers: Array.from({ length: 51 }, () => ({ name: 'L' })) }) });
  assert.is(layers.status, 422);
  assert.match(layers.text, /^ERR - layers /);
  await assertNothingWritten(t, layers);
  const items = await t.call('POST', '/api/locations', { body: body(device, { defaultLayer: { items: Array.from({ length: 1001 }, () => ({ deviceId: device })) } }) });
  assert.is(items.status, 422);
  assert.match(items.text, /^ERR - defaultLayer\.items /);
  await assertNothingWritten(t, items);
  const huge = await t.call('POST', '/api/locations', { body: body(device, { description: 'x'.repeat(1_100_000) }) });
  assert.is(huge.status, 413);
  await assertNothingWritten(t, huge);
  const extra = await t.call('POST', '/api/locations', { body: body(device, { floor: 3 }) });
  assert.is(extra.status, 422);
  assert.match(extra.text, /^ERR - floor is not allowed/);
});

test('given locations of two users, when each lists them with options=count, then X-Total-Count counts only what each can read, whatever the limit', async ({ t, ann }) => {
  const own = await t.call('POST', '/api/iotnodes', { token: ann.token, body: { name: 'Ann counter' } });
  for (let i = 0; i < 3; i++) assert.is((await t.call('POST', '/api/locations', { token: ann.token, body: body(own.body._id, { name: `Ann ${i}` }) })).status, 201);
  const mine = await t.call('GET', '/api/locations?options=count&limit=1', { token: ann.token });
  assert.is(mine.status, 200);
  const annTotal = (await t.platform.deps.db.selectFrom('locations').select('id').where('created_by', '=', ann.id).execute()).length;
  assert.is(mine.headers.get('x-total-count'), String(annTotal));
  assert.is(mine.body.length, 1);
  const all = await t.call('GET', '/api/locations?options=count&limit=1&offset=1');
  const adminTotal = (await t.platform.deps.db.selectFrom('locations').select('id').where('created_by', '!=', ann.id).execute()).length;
  assert.is(all.headers.get('x-total-count'), String(adminTotal));
  assert.not.ok(all.body.some((l: { user: string }) => l.user === ann.id), 'the admin does not see Ann\'s locations');
  assert.is((await t.call('GET', '/api/locations')).headers.get('x-total-count'), null, 'no count unless asked');
});

test.run();
