import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount } from '../users/given.js';
import { box, givenFence, givenMapper, polygon, type Ring } from './given.js';

const fences = suite<{ t: TestPlatform }>('geofences');

fences.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
fences.after(async (ctx) => {
  await ctx.t.stop();
});

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/;

fences('when a geofence is created, then 201 with the stored record, and GET returns the same', async ({ t }) => {
  const ring = box(13.3, 52.5, 13.4, 52.6);
  const res = await t.call('POST', '/api/geofences', { body: { fence: polygon(ring) } });
  assert.is(res.status, 201, res.text);
  const { _id, createdBy, createdAt, updatedAt, ...rest } = res.body;
  assert.match(_id, /^[0-9a-f]{24}$/);
  assert.match(createdAt, ISO);
  assert.is(updatedAt, createdAt);
  assert.type(createdBy, 'string');
  assert.equal(rest, { fence: polygon(ring), ref: null, refType: null });
  const read = await t.call('GET', `/api/geofences/${_id}`);
  assert.is(read.status, 200);
  assert.equal(read.body, res.body);
});

fences('when a geofence is created, then its change is a GeofenceCreated event on geofence-<id>', async ({ t }) => {
  const fence = await givenFence(t, box(1, 1, 2, 2));
  const events = await t.platform.deps.store.readStream(`geofence-${fence._id}`);
  assert.equal(events.map((e) => e.type), ['GeofenceCreated']);
  assert.equal((events[0]!.data as { fence: unknown }).fence, polygon(box(1, 1, 2, 2)));
});

fences('when a geofence is replaced with PUT, then the new fence is stored and updatedAt moves', async ({ t }) => {
  const fence = await givenFence(t, box(1, 1, 2, 2));
  const res = await t.call('PUT', `/api/geofences/${fence._id}`, { body: { fence: polygon(box(3, 3, 4, 4)) } });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body.fence, polygon(box(3, 3, 4, 4)));
  assert.is(res.body.createdAt, fence.createdAt);
  assert.ok(res.body.updatedAt >= fence.updatedAt);
  const events = await t.platform.deps.store.readStream(`geofence-${fence._id}`);
  assert.equal(events.map((e) => e.type), ['GeofenceCreated', 'GeofenceReplaced']);
});

fences('when a geofence is deleted, then 204, GET is 404 and a second delete is 404', async ({ t }) => {
  const fence = await givenFence(t, box(1, 1, 2, 2));
  assert.is((await t.call('DELETE', `/api/geofences/${fence._id}`)).status, 204);
  assert.is((await t.call('GET', `/api/geofences/${fence._id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/geofences/${fence._id}`)).status, 404);
  assert.is((await t.call('PUT', `/api/geofences/${fence._id}`, { body: { fence: polygon(box(1, 1, 2, 2)) } })).status, 404);
});

fences('given a device the caller created, when its id is used as a geofence id, then 404 Geofence not found, never 500', async ({ t }) => {
  const fay = await givenMapper(t, 'fay');
  const device = await t.call('POST', '/api/iotnodes', { token: fay.token, body: { name: 'not a fence' } });
  assert.is(device.status, 201, device.text);
  const id = device.body._id;
  const read = await t.call('GET', `/api/geofences/${id}`, { token: fay.token });
  assert.is(read.status, 404, read.text);
  assert.is(read.text, 'Geofence not found');
  const before = await eventCount(t);
  assert.is((await t.call('PUT', `/api/geofences/${id}`, { token: fay.token, body: { fence: polygon(box(1, 1, 2, 2)) } })).status, 404);
  assert.is((await t.call('DELETE', `/api/geofences/${id}`, { token: fay.token })).status, 404);
  assert.is(await eventCount(t), before);
  assert.is((await t.call('GET', `/api/iotnodes/${id}`, { token: fay.token })).status, 200, 'the device is untouched');
});

fences('when a geofence is deleted, then a GeofenceDeleted event is written on geofence-<id> and the fence leaves the list', async ({ t }) => {
  const fence = await givenFence(t, box(5, 5, 6, 6));
  assert.is((await t.call('DELETE', `/api/geofences/${fence._id}`)).status, 204);
  const events = await t.platform.deps.store.readStream(`geofence-${fence._id}`);
  assert.equal(events.map((e) => e.type), ['GeofenceCreated', 'GeofenceDeleted']);
  assert.is((events[1]!.data as { id: string }).id, fence._id);
  const list = await t.call('GET', '/api/geofences');
  assert.not.ok(list.body.some((f: { _id: string }) => f._id === fence._id));
});

fences('given two fences, one linked to a device, when listing with ref=<device id>, then only the linked fence is returned', async ({ t }) => {
  const gus = await givenMapper(t, 'gus');
  const tracker = await t.call('POST', '/api/iotnodes', { token: gus.token, body: { name: 'gate' } });
  assert.is(tracker.status, 201, tracker.text);
  const linked = await givenFence(t, box(1, 1, 2, 2), { token: gus.token, ref: tracker.body._id });
  const plain = await givenFence(t, box(3, 3, 4, 4), { token: gus.token });
  assert.is(linked.ref, tracker.body._id);
  assert.is(linked.refType, 'device');
  const all = await t.call('GET', '/api/geofences', { token: gus.token });
  assert.equal(all.body.map((f: { _id: string }) => f._id), [linked._id, plain._id]);
  const filtered = await t.call('GET', `/api/geofences?ref=${tracker.body._id}`, { token: gus.token });
  assert.is(filtered.status, 200, filtered.text);
  assert.equal(filtered.body, [linked]);
});

fences('given a device the caller can read but not write, when a fence is linked to it, then 422 naming ref and nothing is written', async ({ t }) => {
  const hal = await givenMapper(t, 'hal');
  const ivy = await givenMapper(t, 'ivy');
  const device = await t.call('POST', '/api/iotnodes', { token: hal.token, body: { name: 'hal tracker' } });
  assert.is(device.status, 201, device.text);
  const grant = await t.call('POST', '/api/access-rights', {
    token: hal.token,
    body: { resourceType: 'device', resourceId: device.body._id, subjectType: 'user', subjectId: ivy.id, scope: ['read'] },
  });
  assert.ok(grant.status < 300, grant.text);
  assert.is((await t.call('GET', `/api/iotnodes/${device.body._id}`, { token: ivy.token })).status, 200, 'ivy can read the device');
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/geofences', { token: ivy.token, body: { fence: polygon(box(1, 1, 2, 2)), ref: device.body._id } });
  assert.is(res.status, 422, res.text);
  assert.match(res.text, /^ERR - ref is a device you cannot write/);
  assert.is(await eventCount(t), before);
  assert.equal((await t.call('GET', '/api/geofences', { token: ivy.token })).body, []);
});

fences('given fences of two users, when each lists, then each sees only the fences they may read', async ({ t }) => {
  const ann = await givenMapper(t, 'ann');
  const ben = await givenMapper(t, 'ben');
  const a = await givenFence(t, box(10, 10, 11, 11), { token: ann.token });
  const b = await givenFence(t, box(20, 20, 21, 21), { token: ben.token });
  const annList = await t.call('GET', '/api/geofences', { token: ann.token });
  assert.equal(annList.body.map((f: { _id: string }) => f._id), [a._id]);
  assert.is(a.createdBy, ann.id);
  assert.is((await t.call('GET', `/api/geofences/${b._id}`, { token: ann.token })).status, 404);
  assert.is((await t.call('PUT', `/api/geofences/${b._id}`, { token: ann.token, body: { fence: polygon(box(1, 1, 2, 2)) } })).status, 404);
  assert.is((await t.call('DELETE', `/api/geofences/${b._id}`, { token: ann.token })).status, 404);
});

fences('given a fence shared with read access only, when the reader changes it, then 403; reading works', async ({ t }) => {
  const cid = await givenMapper(t, 'cid');
  const dee = await givenMapper(t, 'dee');
  const fence = await givenFence(t, box(1, 1, 2, 2), { token: cid.token });
  const grant = await t.call('POST', '/api/access-rights', {
    token: cid.token,
    body: { resourceType: 'geofence', resourceId: fence._id, subjectType: 'user', subjectId: dee.id, scope: ['read'] },
  });
  assert.ok(grant.status < 300, grant.text);
  assert.is((await t.call('GET', `/api/geofences/${fence._id}`, { token: dee.token })).status, 200);
  assert.is((await t.call('PUT', `/api/geofences/${fence._id}`, { token: dee.token, body: { fence: polygon(box(1, 1, 3, 3)) } })).status, 403);
  assert.is((await t.call('DELETE', `/api/geofences/${fence._id}`, { token: dee.token })).status, 403);
});

fences('given a viewer role, when it creates a geofence, then 403 Forbidden', async ({ t }) => {
  const res = await t.call('POST', '/api/users', { body: { username: 'viewer' } });
  const token = await t.login('viewer', res.body.temporaryPassword);
  const post = await t.call('POST', '/api/geofences', { token, body: { fence: polygon(box(1, 1, 2, 2)) } });
  assert.is(post.status, 403);
  assert.is(post.text, 'Forbidden');
});

fences('when listing with limit and offset, then pages follow creation order without overlap', async ({ t }) => {
  const eve = await givenMapper(t, 'eve');
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push((await givenFence(t, box(i, 0, i + 0.5, 0.5), { token: eve.token }))._id);
  const page = async (offset: number) => (await t.call('GET', `/api/geofences?limit=2&offset=${offset}`, { token: eve.token })).body.map((f: { _id: string }) => f._id);
  assert.equal([...(await page(0)), ...(await page(2)), ...(await page(4))], ids);
});

// ---- validation: each rule, the 422 text names it, and nothing is written ----

const rejects = (name: string, body: unknown, pattern: RegExp) =>
  fences(`when ${name}, then 422 naming the rule and no event is written`, async ({ t }) => {
    const before = await eventCount(t);
    const res = await t.call('POST', '/api/geofences', { body });
    assert.is(res.status, 422, res.text);
    assert.match(res.text, /^ERR - /);
    assert.match(res.text, pattern);
    assert.is(await eventCount(t), before);
  });

const ring: Ring = box(0, 0, 1, 1);
rejects('the type is not Polygon', { fence: { type: 'MultiPolygon', coordinates: [[ring]] } }, /fence\.type .*Polygon/);
rejects('the fence is a point', { fence: { type: 'Point', coordinates: [1, 2] } }, /fence\.type .*Polygon/);
rejects('the polygon has a hole (two rings)', { fence: { type: 'Polygon', coordinates: [ring, box(0.2, 0.2, 0.4, 0.4).reverse()] } }, /fence\.coordinates .*more than 1 item/);
rejects('the polygon has no ring', { fence: { type: 'Polygon', coordinates: [] } }, /fence\.coordinates .*fewer than 1 item/);
rejects('the ring has three positions', { fence: polygon([[0, 0], [1, 0], [0, 0]]) }, /fence\.coordinates\.0 .*fewer than 4 items/);
rejects('the ring is not closed', { fence: polygon([[0, 0], [1, 0], [1, 1], [0, 1], [0, 0.5]]) }, /fence\.coordinates\.0 must be a closed ring/);
rejects('a longitude is out of range', { fence: polygon([[0, 0], [181, 0], [1, 1], [0, 0]]) }, /fence\.coordinates\.0\.1 longitude 181 is outside \[-180, 180\]/);
rejects('a latitude is out of range', { fence: polygon([[0, 0], [1, 0], [1, 91], [0, 0]]) }, /fence\.coordinates\.0\.2 latitude 91 is outside \[-90, 90\]/);
rejects('latitude comes first (a latitude beyond 90)', { fence: polygon([[52, 13], [52, 100], [53, 100], [52, 13]]) }, /latitude 100 is outside/);
rejects('a coordinate is a string', { fence: { type: 'Polygon', coordinates: [[[0, 0], ['1', 0], [1, 1], [0, 0]]] } }, /fence\.coordinates\.0\.1\.0 must be number/);
rejects('a position has three numbers', { fence: polygon([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 0, 0]]) }, /fence\.coordinates\.0\.0 .*more than 2 items/);
rejects('the ring crosses itself (a bow tie)', { fence: polygon([[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]) }, /fence\.coordinates\.0 must be a simple polygon.*Self-intersection/);
rejects('the ring is clockwise', { fence: polygon([...ring].reverse()) }, /fence\.coordinates\.0 must be counter-clockwise/);
rejects('the ring is degenerate (all on one line)', { fence: polygon([[0, 0], [1, 0], [2, 0], [0, 0]]) }, /must be a simple polygon/);
rejects('refType is not device', { fence: polygon(ring), ref: 'aaaaaaaaaaaaaaaaaaaaaaaa', refType: 'user' }, /refType .*device/);
rejects('refType comes without ref', { fence: polygon(ring), refType: 'device' }, /refType needs ref/);
rejects('ref is not an id', { fence: polygon(ring), ref: 'nope' }, /^ERR - ref /);
rejects('ref is not a device', { fence: polygon(ring), ref: 'aaaaaaaaaaaaaaaaaaaaaaaa' }, /^ERR - ref is not a device/);
rejects('the fence is missing', {}, /fence/);
rejects('an unknown field is sent', { fence: polygon(ring), color: 'red' }, /color/);

const huge: Ring = Array.from({ length: 1000 }, (_, i) => [Math.cos((2 * Math.PI * i) / 1000), Math.sin((2 * Math.PI * i) / 1000)]);
rejects('the ring has more than 1,000 positions', { fence: polygon([...huge, huge[0]!]) }, /fence\.coordinates\.0 .*more than 1000 items/);

fences('when the ring has exactly 1,000 positions, then it is accepted', async ({ t }) => {
  const ring = [...huge.slice(0, 999), huge[0]!];
  await givenFence(t, ring);
});

fences('when a coordinate is NaN, then the body is not JSON: 422, never 500', async ({ t }) => {
  const res = await t.call('POST', '/api/geofences', { raw: '{"fence":{"type":"Polygon","coordinates":[[[0,0],[NaN,0],[1,1],[0,0]]]}}' });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - /);
});

fences('when a PUT breaks a rule, then 422 and the stored fence is unchanged', async ({ t }) => {
  const fence = await givenFence(t, box(1, 1, 2, 2));
  const res = await t.call('PUT', `/api/geofences/${fence._id}`, { body: { fence: polygon(box(1, 1, 2, 2).reverse()) } });
  assert.is(res.status, 422);
  assert.match(res.text, /counter-clockwise/);
  assert.equal((await t.call('GET', `/api/geofences/${fence._id}`)).body, fence);
});

fences.run();
