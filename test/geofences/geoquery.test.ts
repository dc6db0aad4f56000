import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { box, givenFence, givenMapper, type GivenUser, type Ring } from './given.js';

const geo = suite<{ t: TestPlatform; ann: GivenUser; ben: GivenUser; ids: Record<string, string>; fenceId: string }>('geoquery');

const point = (lng: number, lat: number) => ({ type: 'Point', coordinates: [lng, lat] });

async function device(t: TestPlatform, name: string, lnglat: unknown, token?: string): Promise<string> {
  const body: Record<string, unknown> = { name, category: name.startsWith('pump') ? 'pump' : 'meter' };
  if (lnglat) body.lnglat = lnglat;
  const res = await t.call('POST', '/api/iotnodes', { body, token });
  assert.is(res.status, 201, res.text);
  return res.body._id;
}

const FENCE: Ring = box(10, 50, 11, 51);
const contains = (ring: Ring) => `type:contains;coordinates=${JSON.stringify(ring)}`;

async function names(t: TestPlatform, query: string, token?: string): Promise<string[]> {
  const res = await t.call('GET', `/api/iotnodes?${query}`, { token });
  assert.is(res.status, 200, res.text);
  return res.body.map((d: { name: string }) => d.name).sort();
}

geo.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  ctx.ann = await givenMapper(t, 'ann');
  ctx.ben = await givenMapper(t, 'ben');
  ctx.ids = {};
  // ann's devices: inside, on an edge, on a corner, outside, without position
  for (const [name, at] of [
    ['pump-in-1', point(10.5, 50.5)],
    ['pump-in-2', point(10.1, 50.9)],
    ['meter-in-3', point(10.9, 50.1)],
    ['pump-edge', point(10.5, 50)],
    ['pump-corner', point(11, 51)],
    ['pump-out', point(12, 50.5)],
    ['pump-nowhere', null],
  ] as const) {
    ctx.ids[name] = await device(t, name, at, ctx.ann.token);
  }
  // ben's device, inside, which ann cannot read
  ctx.ids['ben-in'] = await device(t, 'ben-in', point(10.4, 50.4), ctx.ben.token);
  ctx.fenceId = (await givenFence(t, FENCE, { token: ctx.ann.token }))._id;
});
geo.after(async (ctx) => {
  await ctx.t.stop();
});

geo('when querying with an inline polygon, then only readable devices strictly inside match: not on an edge or corner, not without a position', async ({ t, ann }) => {
  assert.equal(await names(t, `geoquery=${encodeURIComponent(contains(FENCE))}`, ann.token), ['meter-in-3', 'pump-in-1', 'pump-in-2']);
});

geo('when querying with a stored fence id, then the answer equals the inline polygon', async ({ t, ann, fenceId }) => {
  assert.equal(await names(t, `geoquery=id:${fenceId}`, ann.token), ['meter-in-3', 'pump-in-1', 'pump-in-2']);
});

geo('given another user, when they query the same polygon, then they see only their own device', async ({ t, ben }) => {
  assert.equal(await names(t, `geoquery=${encodeURIComponent(contains(FENCE))}`, ben.token), ['ben-in']);
});

geo('given a fence the caller cannot read, when querying by its id, then 404', async ({ t, ben, fenceId }) => {
  const res = await t.call('GET', `/api/iotnodes?geoquery=id:${fenceId}`, { token: ben.token });
  assert.is(res.status, 404);
});

geo('given a fence id that does not exist, when querying by it, then 404', async ({ t, ann }) => {
  const res = await t.call('GET', `/api/iotnodes?geoquery=id:${'0'.repeat(24)}`, { token: ann.token });
  assert.is(res.status, 404);
});

geo('given a device id the caller can read, when querying by it as a fence id, then 404 like an unknown fence', async ({ t, ann, ids }) => {
  const res = await t.call('GET', `/api/iotnodes?geoquery=id:${ids['pump-in-1']}`, { token: ann.token });
  assert.is(res.status, 404, res.text);
  assert.is(res.text, 'Geofence not found');
});

geo('when geoquery is combined with a filter, then both apply', async ({ t, ann }) => {
  assert.equal(await names(t, `geoquery=${encodeURIComponent(contains(FENCE))}&filter[category]=pump`, ann.token), ['pump-in-1', 'pump-in-2']);
});

geo('when geoquery results are paged, then the pages partition the matches in order', async ({ t, ann }) => {
  const q = `geoquery=${encodeURIComponent(contains(FENCE))}&orderBy=name&limit=2`;
  const first = await t.call('GET', `/api/iotnodes?${q}&offset=0`, { token: ann.token });
  const second = await t.call('GET', `/api/iotnodes?${q}&offset=2`, { token: ann.token });
  assert.equal(first.body.map((d: { name: string }) => d.name), ['meter-in-3', 'pump-in-1']);
  assert.equal(second.body.map((d: { name: string }) => d.name), ['pump-in-2']);
});

geo('when a device moves out of the fence, then it no longer matches', async ({ t, ann, ids }) => {
  const moved = await t.call('PUT', `/api/iotnodes/${ids['meter-in-3']}`, { token: ann.token, body: { lnglat: point(20, 20) } });
  assert.is(moved.status, 200, moved.text);
  assert.equal(await names(t, `geoquery=${encodeURIComponent(contains(FENCE))}`, ann.token), ['pump-in-1', 'pump-in-2']);
  await t.call('PUT', `/api/iotnodes/${ids['meter-in-3']}`, { token: ann.token, body: { lnglat: point(10.9, 50.1) } });
});

const rejects = (name: string, query: string, pattern: RegExp) =>
  geo(`when the geoquery ${name}, then 422 naming the rule`, async ({ t }) => {
    const res = await t.call('GET', `/api/iotnodes?geoquery=${encodeURIComponent(query)}`);
    assert.is(res.status, 422, res.text);
    assert.match(res.text, /^ERR - geoquery/);
    assert.match(res.text, pattern);
  });

rejects('ring is clockwise', contains([...FENCE].reverse()), /must be counter-clockwise/);
rejects('ring is not closed', contains(FENCE.slice(0, 4)), /must be a closed ring/);
rejects('ring crosses itself', contains([[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]), /simple polygon/);
rejects('ring has three positions', contains([[0, 0], [1, 0], [0, 0]]), /fewer than 4 items/);
rejects('ring has a longitude out of range', contains([[0, 0], [181, 0], [1, 1], [0, 0]]), /geoquery\.coordinates\.1 longitude 181 is outside \[-180, 180\]/);
rejects('ring has a latitude out of range', contains([[0, 0], [1, 0], [1, 95], [0, 0]]), /latitude 95 is outside/);
rejects('ring has a string coordinate', 'type:contains;coordinates=[[0,0],["1",0],[1,1],[0,0]]', /must be number/);
rejects('ring has NaN', 'type:contains;coordinates=[[0,0],[NaN,0],[1,1],[0,0]]', /not valid JSON/);
rejects('type is within', `type:within;coordinates=${JSON.stringify(FENCE)}`, /only type:contains/);
rejects('is a point', 'type:contains;coordinates=[10,50]', /only polygons are supported/);
rejects('has a hole', `type:contains;coordinates=${JSON.stringify([FENCE, box(10.2, 50.2, 10.3, 50.3).reverse()])}`, /only polygons are supported/);
rejects('has bad syntax', 'contains(10 50)', /supported forms are type:contains;coordinates=\[\[lng,lat\],\.\.\.\] or id:<geofence_id>/);
rejects('names an unknown part', 'radius:5', /'radius' is not supported/);
rejects('id is not an id', 'id:123', /is not a geofence id/);

// Short positions keep 1,001 of them within the URL limit; the count is checked before any geometry.
rejects('ring has more than 1,000 positions', contains(Array.from({ length: 1001 }, () => [0, 0])), /more than 1000 items/);

/**
 * `count` positions on a circle around a real place, counter-clockwise, with
 * six decimals as a GPS would give them, and the first repeated to close it.
 */
const circle = (count: number, [lng, lat]: [number, number], radius: number): Ring => {
  const r = (x: number) => Number(x.toFixed(6));
  const ring = Array.from({ length: count }, (_, i) => {
    const a = (2 * Math.PI * i) / count;
    return [r(lng + radius * Math.cos(a)), r(lat + radius * Math.sin(a))];
  });
  return [...ring, ring[0]!];
};

geo('when the inline ring has 1,000 realistic positions, then it is accepted and answered', async ({ t, ann }) => {
  const ring = circle(999, [10.512345, 50.512345], 0.05);
  assert.is(ring.length, 1000);
  assert.ok(ring.every(([lng, lat]) => /^\d+\.\d{6}$/.test(lng!.toFixed(6)) && /^\d+\.\d{6}$/.test(lat!.toFixed(6))));
  // pump-in-1 at (10.5, 50.5) is about 0.017 degrees from the centre; no other device is within 0.05.
  assert.equal(await names(t, `geoquery=${encodeURIComponent(contains(ring))}`, ann.token), ['pump-in-1']);
});

geo('when the inline ring has 1,001 realistic positions, then 422 naming the cap, not 431', async ({ t, ann }) => {
  const ring = circle(1000, [10.512345, 50.512345], 0.05);
  assert.is(ring.length, 1001);
  const res = await t.call('GET', `/api/iotnodes?geoquery=${encodeURIComponent(contains(ring))}`, { token: ann.token });
  assert.is(res.status, 422, res.text);
  assert.match(res.text, /^ERR - geoquery\.coordinates .*more than 1000 items/);
});

geo.run();
