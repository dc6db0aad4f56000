import { randomBytes, randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { projected } from '../ingest/support.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { deviceStream, type DeviceEvent } from '../../domain/devices/device.js';

const devices = suite<{ t: TestPlatform; viewer: string; installer: string; installerId: string }>('Devices (iotnodes) over REST');

devices.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const mk = (username: string, roles: string[]) => givenUser(ctx.t, username, { attributes: { roles } });
  ctx.viewer = (await mk('viewer', ['viewerBasic'])).token;
  const installer = await mk('installer', ['installer']);
  ctx.installer = installer.token;
  ctx.installerId = installer.id;
});
devices.after(async (ctx) => {
  await ctx.t.stop();
});

devices('when a device is created, then it reads back with the fields it was given and maintained timestamps', async ({ t }) => {
  const res = await t.call('POST', '/api/iotnodes', { body: { name: 'Boiler', category: 'heating', setpoint: 21, lnglat: { type: 'Point', coordinates: [4.35, 50.85] } } });
  assert.is(res.status, 201, res.text);
  assert.match(res.body._id, /^[0-9a-f]{24}$/);
  assert.is(res.body.setpoint, 21);
  assert.ok(res.body.updatedAt);
  assert.ok(res.body.rabbitRouting);
  const got = await t.call('GET', `/api/iotnodes/${res.body._id}`);
  assert.equal(got.body, res.body);
});

devices('when a device has lnglat, then the read model holds it as a PostGIS point', async ({ t }) => {
  const res = await t.call('POST', '/api/iotnodes', { body: { name: 'Tracker', lnglat: { type: 'Point', coordinates: [5.5, 51.25] } } });
  const { rows } = await sql<{ x: number; y: number; srid: number }>`SELECT ST_X(lnglat) AS x, ST_Y(lnglat) AS y, ST_SRID(lnglat) AS srid FROM devices WHERE id = ${res.body._id}`.execute(t.platform.deps.db);
  assert.equal(rows[0], { x: 5.5, y: 51.25, srid: 4326 });
});

devices('when the name is missing, empty or contains ~||~, then 422 names the field', async ({ t }) => {
  for (const body of [{}, { name: '' }, { name: 'a~||~b' }]) {
    const res = await t.call('POST', '/api/iotnodes', { body });
    assert.is(res.status, 422, JSON.stringify(body));
    assert.match(res.text, /^ERR - name /);
  }
});

devices('when lnglat is not a GeoJSON Point with longitude first, then 422', async ({ t }) => {
  for (const lnglat of [{ type: 'Point', coordinates: [50.85, 200] }, { type: 'LineString', coordinates: [1, 2] }, [4.3, 50.8]]) {
    const res = await t.call('POST', '/api/iotnodes', { body: { name: 'x', lnglat } });
    assert.is(res.status, 422, JSON.stringify(lnglat));
    assert.match(res.text, /lnglat/);
  }
});

devices('when rabbitRouting is written, then 422 and nothing changes', async ({ t }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'R' } });
  const res = await t.call('PUT', `/api/iotnodes/${created.body._id}`, { body: { rabbitRouting: { x: 1 } } });
  assert.is(res.status, 422);
  assert.match(res.text, /rabbitRouting/);
  const again = await t.call('POST', '/api/iotnodes', { body: { name: 'R2', rabbitRouting: {} } });
  assert.is(again.status, 422);
});

devices('given an iotnode read with GET, when the same document is PUT back with one field changed, then 200, rabbitRouting kept as it was', async ({ t }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'Round trip', setpoint: 19 } });
  assert.is(created.status, 201, created.text);
  const read = await t.call('GET', `/api/iotnodes/${created.body._id}`);
  const res = await t.call('PUT', `/api/iotnodes/${created.body._id}`, { body: { ...read.body, setpoint: 20 } });
  assert.is(res.status, 200, res.text);
  assert.is(res.body.setpoint, 20);
  assert.equal(res.body.rabbitRouting, read.body.rabbitRouting);
  const changed = await t.call('PUT', `/api/iotnodes/${created.body._id}`, { body: { ...read.body, rabbitRouting: { ...read.body.rabbitRouting, routingKey: 'elsewhere' } } });
  assert.is(changed.status, 422, changed.text);
  assert.match(changed.text, /^ERR - rabbitRouting is internal and cannot be changed/);
});

devices('when connector is given as {_id}, then it is stored as the id', async ({ t }) => {
  const connector = 'aaaaaaaaaaaaaaaaaaaaaaaa';
  const res = await t.call('POST', '/api/iotnodes', { body: { name: 'C', connector: { _id: connector } } });
  assert.is(res.status, 201, res.text);
  assert.is(res.body.connector, connector);
  const put = await t.call('PUT', `/api/iotnodes/${res.body._id}`, { body: { connector: 'bbbbbbbbbbbbbbbbbbbbbbbb' } });
  assert.is(put.body.connector, 'bbbbbbbbbbbbbbbbbbbbbbbb');
});

devices('when a device is updated with PUT, then given fields change, null removes one, others stay, updatedAt moves', async ({ t }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'U', a: 1, b: 2 } });
  await new Promise((r) => setTimeout(r, 5));
  const put = await t.call('PUT', `/api/iotnodes/${created.body._id}`, { body: { a: 10, b: null, c: 'x' } });
  assert.is(put.status, 200, put.text);
  assert.is(put.body.a, 10);
  assert.is(put.body.b, undefined);
  assert.is(put.body.c, 'x');
  assert.is(put.body.name, 'U');
  assert.ok(put.body.updatedAt > created.body.updatedAt);
});

devices('when listing, then paging, ordering, filters, field selection and the count work', async ({ t }) => {
  for (const [name, category, floor] of [['List A', 'lamp', '1'], ['List B', 'lamp', '2'], ['List C', 'sensor', '1']]) {
    await t.call('POST', '/api/iotnodes', { body: { name, category, floor } });
  }
  const lamps = await t.call('GET', '/api/iotnodes?filter[category]=lamp&orderBy=-name&options=count');
  assert.equal(lamps.body.map((d: { name: string }) => d.name), ['List B', 'List A']);
  assert.is(lamps.headers.get('x-total-count'), '2');
  const byName = await t.call('GET', '/api/iotnodes?filter[name]=list&limit=1&offset=1&orderBy=name');
  assert.equal(byName.body.map((d: { name: string }) => d.name), ['List B']);
  const byField = await t.call('GET', '/api/iotnodes?filter[floor]=1&filter[name]=list&fields=name');
  assert.equal(byField.body.map((d: Record<string, unknown>) => Object.keys(d).sort()), [['_id', 'name'], ['_id', 'name']]);
});

devices('when another user lists or reads, then devices without access rights are hidden', async ({ t, viewer }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'Private' } });
  const list = await t.call('GET', '/api/iotnodes', { token: viewer });
  assert.is(list.status, 200);
  assert.equal(list.body, []);
  const one = await t.call('GET', `/api/iotnodes/${created.body._id}`, { token: viewer });
  assert.is(one.status, 404);
});

devices('when a viewer creates a device, then 403 Forbidden', async ({ t, viewer }) => {
  const res = await t.call('POST', '/api/iotnodes', { token: viewer, body: { name: 'nope' } });
  assert.is(res.status, 403);
  assert.is(res.text, 'Forbidden');
});

devices('when a device is deleted, then it is gone and so are its access rights', async ({ t }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'Gone' } });
  const del = await t.call('DELETE', `/api/iotnodes/${created.body._id}`);
  assert.is(del.status, 204);
  assert.is((await t.call('GET', `/api/iotnodes/${created.body._id}`)).status, 404);
  const rights = await t.platform.deps.db.selectFrom('access_rights').select('resource_id').where('resource_id', '=', created.body._id).execute();
  assert.equal(rights, []);
});

devices('when two devices claim the same secret, then the second gets 409', async ({ t }) => {
  const a = await t.call('POST', '/api/iotnodes', { body: { name: 'S1', secret: 'svc/generic/v2/dup' } });
  assert.is(a.status, 201);
  const b = await t.call('POST', '/api/iotnodes', { body: { name: 'S2', secret: 'svc/generic/v2/dup' } });
  assert.is(b.status, 409);
});

devices('when a secret is over 1024 bytes (1024 characters of three bytes each), then 422 names it and nothing is stored; 1024 bytes are taken', async ({ t }) => {
  const long = '統'.repeat(1024);
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'long secret', secret: long } });
  assert.is(created.status, 422, created.text);
  assert.match(created.text, /^ERR - secret /);
  const listed = await t.call('GET', '/api/iotnodes');
  assert.ok(!(listed.body as { name: string }[]).some((d) => d.name === 'long secret'));
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'short secret', secret: '統'.repeat(341) } });
  assert.is(device.status, 201, device.text);
  const updated = await t.call('PUT', `/api/iotnodes/${device.body._id}`, { body: { secret: long } });
  assert.is(updated.status, 422, updated.text);
  const read = await t.call('GET', `/api/iotnodes/${device.body._id}`);
  assert.is(read.body.secret, '統'.repeat(341));
});

devices('when a client writes an assetList naming no device (a 3,000-character assetId), then the update is stored and shown, and nothing is set aside', async ({ t }) => {
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'listed by hand' } });
  const assetId = randomBytes(2250).toString('base64');
  const updated = await t.call('PUT', `/api/iotnodes/${device.body._id}`, { body: { assetList: [{ assetId }], note: 'after' } });
  assert.is(updated.status, 200, updated.text);
  assert.is(updated.body.note, 'after');
  assert.equal(updated.body.assetList, [{ assetId }]);
  const parked = await t.platform.deps.db.selectFrom('es.parked_events' as any).select('event_id').execute();
  assert.equal(parked, []);
});

devices('given a device with 400 reports, when it is updated, then only the events after its read-model row are read, and the update decides on the reported values', async ({ t }) => {
  // The store as the routes read it.
  const { store } = t.platform.served;
  const id = (await t.call('POST', '/api/iotnodes', { body: { name: 'Chatty', setpoint: 18 } })).body._id as string;
  for (let i = 0; i < 400; i++) {
    const event: DeviceEvent = { type: 'DeviceReported', data: { id, topic: 'svc/generic/v2/chatty', path: [], payload: { n: i, setpoint: 20 + (i % 3) }, reportedAt: new Date(Date.UTC(2024, 0, 1, 0, 0, i)).toISOString() } };
    await store.append(deviceStream(id), [toNewEvent(event, { actor: 'credentials:x', correlationId: randomUUID(), now: event.data.reportedAt })], 'any');
  }
  await projected(t);
  const reads: { fromRevision?: number }[] = [];
  const readStream = store.readStream.bind(store);
  store.readStream = (streamId, options) => {
    if (streamId === deviceStream(id)) reads.push(options ?? {});
    return readStream(streamId, options);
  };
  try {
    // The last report set setpoint to 20 + 399 % 3 = 20: the same value decides nothing.
    const same = await t.call('PUT', `/api/iotnodes/${id}`, { body: { setpoint: 20 } });
    assert.is(same.status, 200, same.text);
    assert.equal(reads, [{ fromRevision: 401 }], 'read from after the row, at revision 400');
    assert.is((await store.readStream(deviceStream(id))).length, 401, 'no event for a value the device already has');
    const changed = await t.call('PUT', `/api/iotnodes/${id}`, { body: { setpoint: 25 } });
    assert.is(changed.body.setpoint, 25);
    assert.is(changed.body.n, 399, 'the reports stay');
    assert.is((await t.call('DELETE', `/api/iotnodes/${id}`)).status, 204);
    assert.is((await t.call('GET', `/api/iotnodes/${id}`)).status, 404);
  } finally {
    store.readStream = readStream;
  }
});

devices.run();
