import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';

export type Ring = number[][];

/** A counter-clockwise axis-aligned rectangle, closed. */
export const box = (west: number, south: number, east: number, north: number): Ring => [
  [west, south],
  [east, south],
  [east, north],
  [west, north],
  [west, south],
];

export const polygon = (ring: Ring) => ({ type: 'Polygon', coordinates: [ring] });

export interface GivenUser {
  id: string;
  token: string;
}

/** Platforms that already have the role; each suite runs its own platform. */
const withRole = new WeakSet<TestPlatform>();

/**
 * A user whose custom role may do everything with geofences, devices and their
 * access rights: they hold rights only on what they create or are given.
 */
export async function givenMapper(t: TestPlatform, username: string): Promise<GivenUser> {
  if (!withRole.has(t)) {
    const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
    const role = await t.call('POST', '/api/roles', { body: { name: 'mapper', permissions: { geofence: all, device: all, accessRight: all } } });
    assert.ok(role.status === 201 || role.status === 409, role.text);
    withRole.add(t);
  }
  const res = await t.call('POST', '/api/users', { body: { username, attributes: { roles: ['mapper'] } } });
  assert.is(res.status, 201, res.text);
  return { id: res.body.id, token: await t.login(username, res.body.temporaryPassword) };
}

/** Creates a geofence and returns its record; fails the test on anything but 201. */
export async function givenFence(t: TestPlatform, ring: Ring, options: { token?: string; ref?: string } = {}): Promise<Record<string, any>> {
  const body: Record<string, unknown> = { fence: polygon(ring) };
  if (options.ref) body.ref = options.ref;
  const res = await t.call('POST', '/api/geofences', { body, token: options.token });
  assert.is(res.status, 201, res.text);
  return res.body;
}
