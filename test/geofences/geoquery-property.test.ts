import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { booleanPointInPolygon } from '@turf/boolean-point-in-polygon';
import { point as turfPoint, polygon as turfPolygon } from '@turf/helpers';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import type { Ring } from './given.js';

/**
 * The geoquery (PostGIS `ST_Contains` on the devices' GiST-indexed points)
 * against an independent point-in-polygon check (turf), on random convex and
 * concave polygons over random device positions. Points on the boundary are
 * left out: "contains" is strict there, and which side a point within
 * rounding of an edge falls is not what this compares.
 */
const property = suite<{ t: TestPlatform; devices: Map<string, [number, number]> }>('geoquery property');

const DEVICES = 300;
const round = (x: number) => Math.round(x * 1e5) / 1e5;

property.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.devices = new Map();
  const positions = fc.sample(fc.tuple(fc.double({ min: 10, max: 11, noNaN: true }), fc.double({ min: 50, max: 51, noNaN: true })), { numRuns: DEVICES, seed: 42 });
  for (const [i, [x, y]] of positions.entries()) {
    const at: [number, number] = [round(x), round(y)];
    const res = await ctx.t.call('POST', '/api/iotnodes', { body: { name: `d${i}`, lnglat: { type: 'Point', coordinates: at } } });
    assert.is(res.status, 201, res.text);
    ctx.devices.set(res.body._id, at);
  }
});
property.after(async (ctx) => {
  await ctx.t.stop();
});

/**
 * A star-shaped ring around a centre: vertices at increasing angles, so it is
 * simple and counter-clockwise. Equal radii make it convex; varied radii make
 * it concave.
 */
const ringArb = (convex: boolean) =>
  fc
    .record({
      cx: fc.double({ min: 10.1, max: 10.9, noNaN: true }),
      cy: fc.double({ min: 50.1, max: 50.9, noNaN: true }),
      r: fc.double({ min: 0.05, max: 0.6, noNaN: true }),
      vertices: fc.array(fc.record({ gap: fc.double({ min: 0.2, max: 1, noNaN: true }), k: fc.double({ min: 0.15, max: 1, noNaN: true }) }), { minLength: 3, maxLength: 14 }),
    })
    .map(({ cx, cy, r, vertices }) => {
      const total = vertices.reduce((s, v) => s + v.gap, 0);
      let angle = 0;
      const ring: Ring = vertices.map((v) => {
        angle += (v.gap / total) * 2 * Math.PI;
        const radius = convex ? r : r * v.k;
        return [round(cx + radius * Math.cos(angle)), round(cy + radius * Math.sin(angle))];
      });
      return [...ring, ring[0]!];
    });

async function agrees(t: TestPlatform, devices: Map<string, [number, number]>, ring: Ring): Promise<boolean> {
  const query = encodeURIComponent(`type:contains;coordinates=${JSON.stringify(ring)}`);
  const res = await t.call('GET', `/api/iotnodes?geoquery=${query}&limit=${DEVICES}`);
  if (res.status !== 200) throw new Error(`geoquery answered ${res.status}: ${res.text} for ${JSON.stringify(ring)}`);
  const found = new Set(res.body.map((d: { _id: string }) => d._id));
  const fence = turfPolygon([ring]);
  for (const [id, at] of devices) {
    const strict = booleanPointInPolygon(turfPoint(at), fence, { ignoreBoundary: true });
    const loose = booleanPointInPolygon(turfPoint(at), fence, { ignoreBoundary: false });
    if (strict !== loose) continue; // on the boundary
    if (found.has(id) !== strict) throw new Error(`device at ${at} is ${strict ? 'inside' : 'outside'} by turf but ${found.has(id) ? 'matched' : 'not matched'} by geoquery, ring ${JSON.stringify(ring)}`);
  }
  return true;
}

property('for random convex polygons, geoquery matches exactly the devices turf finds strictly inside', async ({ t, devices }) => {
  await fc.assert(fc.asyncProperty(ringArb(true), (ring) => agrees(t, devices, ring)), { numRuns: 40, seed: 7 });
});

property('for random concave polygons, geoquery matches exactly the devices turf finds strictly inside', async ({ t, devices }) => {
  await fc.assert(fc.asyncProperty(ringArb(false), (ring) => agrees(t, devices, ring)), { numRuns: 40, seed: 11 });
});

property('for a polygon through device positions, those on its corners are not matched', async ({ t, devices }) => {
  const [a, b, c] = [...devices.entries()].sort(([, p], [, q]) => p[0] - q[0]).filter((_, i) => i % 100 === 0);
  const ring: Ring = [a![1], b![1], c![1], a![1]];
  // Make it counter-clockwise whichever way the three points turn.
  const cross = (ring[1]![0]! - ring[0]![0]!) * (ring[2]![1]! - ring[0]![1]!) - (ring[1]![1]! - ring[0]![1]!) * (ring[2]![0]! - ring[0]![0]!);
  const ccw = cross > 0 ? ring : [...ring].reverse();
  const res = await t.call('GET', `/api/iotnodes?geoquery=${encodeURIComponent(`type:contains;coordinates=${JSON.stringify(ccw)}`)}&limit=${DEVICES}`);
  assert.is(res.status, 200, res.text);
  const found = new Set(res.body.map((d: { _id: string }) => d._id));
  for (const [id] of [a!, b!, c!]) assert.not.ok(found.has(id), 'a corner is on the boundary');
});

property.run();
