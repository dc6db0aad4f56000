import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import type { Response, TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';

/**
 * A tenant: an ordinary user with a custom role that may create and change
 * what a device owner needs (devices, credentials sets, topics, connectors,
 * channels, dashboards, geofences, device groups, rules, calculations, locations,
 * organization units, apps), and nothing on users or
 * roles. Two tenants share the platform and nothing else.
 */
export const TENANT_ROLE = 'tenant';

export async function givenTenantRole(t: TestPlatform): Promise<void> {
  const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
  const permissions = Object.fromEntries(
    ['device', 'deviceGroup', 'credentialsSet', 'reservedTopic', 'connector', 'channel', 'dashboard', 'geofence', 'image', 'translator', 'log', 'accessRight', 'rule', 'calculation', 'location', 'organization', 'app'].map((r) => [r, all]),
  );
  const res = await t.call('POST', '/api/roles', { body: { name: TENANT_ROLE, permissions } });
  assert.ok(res.status === 201 || res.status === 409, res.text);
}

export async function givenTenant(t: TestPlatform, name: string): Promise<GivenUser> {
  await givenTenantRole(t);
  return givenUser(t, name, { attributes: { roles: [TENANT_ROLE] } });
}

/** The request the response answers wrote no event: every event carries its request id as correlation id. */
export async function assertNothingWritten(t: TestPlatform, res: Response): Promise<void> {
  const id = res.headers.get('x-request-id');
  assert.ok(id, 'the answer carries X-Request-Id');
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE metadata->>'correlationId' = ${id}`.execute(t.platform.deps.db);
  assert.is(rows[0]!.n, 0, `request ${id} (${res.status} ${res.text.slice(0, 120)}) stored events`);
}
