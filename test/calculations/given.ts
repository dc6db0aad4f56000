import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';

/** Platforms that already have the role; each suite runs its own platform. */
const withRole = new WeakSet<TestPlatform>();

/**
 * A user whose custom role may do everything with calculations, devices and
 * access rights, and who holds rights only on what it creates or is given.
 */
export async function givenCalculator(t: TestPlatform, username: string): Promise<GivenUser> {
  if (!withRole.has(t)) {
    const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
    const role = await t.call('POST', '/api/roles', { body: { name: 'calculator', permissions: { calculation: all, device: all, accessRight: all, log: ['GET'] } } });
    assert.ok(role.status === 201 || role.status === 409, role.text);
    withRole.add(t);
  }
  return givenUser(t, username, { attributes: { roles: ['calculator'] } });
}

/** A device created through REST; fails the test on anything but 201. */
export async function givenDevice(t: TestPlatform, name: string, token?: string, fields: Record<string, unknown> = {}): Promise<string> {
  const res = await t.call('POST', '/api/iotnodes', { token, body: { name, ...fields } });
  assert.is(res.status, 201, res.text);
  return res.body._id as string;
}

/** Gives a user (or a group) a scope on a resource as the admin. */
export async function grant(t: TestPlatform, resourceType: string, resourceId: string, userId: string, scope: string[]): Promise<void> {
  const res = await t.call('POST', '/api/access-rights', { body: { resourceType, resourceId, subjectType: 'user', subjectId: userId, scope } });
  assert.ok(res.status < 300, res.text);
}

export const onChange = { type: 'onChange' } as const;

export const lastValue = (sources: [string, string][], destination: [string, string], aggregation = 'sum', schedule: Record<string, unknown> = onChange, name = 'total') => ({
  name,
  type: 'lastValue',
  sources: sources.map(([deviceId, field]) => ({ deviceId, field })),
  destination: { deviceId: destination[0], field: destination[1] },
  aggregation,
  schedule,
});

export const windowOf = (source: [string, string], seconds: number, destination: [string, string], aggregation = 'mean', schedule: Record<string, unknown> = onChange, name = 'window') => ({
  name,
  type: 'window',
  source: { deviceId: source[0], field: source[1] },
  window: { seconds },
  destination: { deviceId: destination[0], field: destination[1] },
  aggregation,
  schedule,
});

/** Creates a calculation; fails the test on anything but 201. */
export async function givenCalculation(t: TestPlatform, body: unknown, token?: string): Promise<Record<string, any>> {
  const res = await t.call('POST', '/api/calculations', { token, body });
  assert.is(res.status, 201, res.text);
  return res.body;
}

/** The raw readings of a device field, oldest first, through `GET /api/iotnodes/{id}/stats`. */
export async function readings(t: TestPlatform, deviceId: string, field: string, token?: string): Promise<{ time: string; value: unknown }[]> {
  const res = await t.call('GET', `/api/iotnodes/${deviceId}/stats?measurement=${encodeURIComponent(field)}&start=0&end=4102444800`, { token });
  assert.is(res.status, 200, res.text);
  return res.body;
}

/** A small deterministic generator (mulberry32), so a failure can be replayed. */
export function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
