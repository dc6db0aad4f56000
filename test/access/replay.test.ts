import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { accessProjection } from '../../projections/access.js';
import { usergroupsProjection } from '../../projections/usergroups.js';
import { usersProjection } from '../../projections/users.js';

const replay = suite<{ t: TestPlatform }>('access read models on replay');

const TABLES = ['users', 'access_rights', 'roles', 'usergroups', 'usergroup_members'];

async function snapshot(t: TestPlatform): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of TABLES) {
    const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(x) AS row FROM ${sql.table(table)} x`.execute(t.platform.deps.db);
    out[table] = rows.map((r) => JSON.stringify(r.row)).sort();
  }
  return out;
}

replay.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  // Every event type of users, roles, rights and usergroups, including deletions.
  const ok = async (method: string, path: string, body?: unknown, token?: string) => {
    const res = await t.call(method, path, { body, token });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  await ok('POST', '/api/roles', { name: 'keeper', permissions: { usergroup: ['GET', 'POST'] } });
  await ok('PUT', '/api/roles/keeper', { permissions: { usergroup: ['GET'] } });
  await ok('POST', '/api/roles', { name: 'shortLived', permissions: {} });
  await ok('DELETE', '/api/roles/shortLived');
  const ann = await givenUser(t, 'ann', { attributes: { roles: ['keeper'], organization: ['acme'] } });
  const ben = await givenUser(t, 'ben');
  await ok('PATCH', `/api/users/${ben.id}`, { firstName: 'Ben' });
  await ok('PUT', '/api/auth/password', { currentPassword: ben.password, newPassword: 'bens-password' }, ben.token);
  await ok('POST', `/api/users/${ben.id}/reset-password`);
  const team = await ok('POST', '/api/usergroups', { name: 'team' });
  const gone = await ok('POST', '/api/usergroups', { name: 'gone' });
  await ok('PATCH', `/api/usergroups/${team._id}`, { name: 'team two' });
  await ok('POST', `/api/usergroups/${team._id}/members`, { userId: ann.id });
  await ok('POST', `/api/usergroups/${team._id}/members`, { userId: ben.id });
  await ok('DELETE', `/api/usergroups/${team._id}/members/${ben.id}`);
  await ok('POST', `/api/usergroups/${team._id}/members`, { userId: ben.id });
  await ok('POST', `/api/usergroups/${gone._id}/members`, { userId: ann.id });
  const base = { resourceType: 'usergroup', resourceId: team._id };
  await ok('POST', '/api/access-rights', { ...base, subjectType: 'singleton', subjectId: ben.id, scope: ['read', 'write'] });
  await ok('DELETE', '/api/access-rights', { ...base, subjectType: 'singleton', subjectId: ben.id, scope: ['write'] });
  await ok('POST', '/api/access-rights', { ...base, subjectType: 'group', subjectId: gone._id, scope: ['read'] });
  await ok('POST', '/api/access-rights', { ...base, subjectType: 'orgUnit', subjectId: 'acme', scope: ['peek'] });
  await ok('POST', '/api/access-rights', { ...base, subjectType: 'singleton', subjectId: ann.id, scope: ['read'] });
  await ok('DELETE', `/api/usergroups/${gone._id}`);
  await ok('DELETE', `/api/users/${ann.id}`);
});
replay.after(async (ctx) => {
  await ctx.t.stop();
});

replay('given every kind of event, when all are applied a second time, then no row changes', async ({ t }) => {
  const before = await snapshot(t);
  // Left: the team's creator, ben's read, acme's peek; one role; the team with ben alone.
  assert.equal([before.access_rights!.length, before.roles!.length, before.usergroups!.length, before.usergroup_members!.length], [3, 1, 1, 1]);
  const { db, store } = t.platform.deps;
  const again = new ProjectionRunner(store, db, [usersProjection, accessProjection, usergroupsProjection], pino({ level: 'silent' }), 'access-replay');
  await again.catchUp();
  assert.equal(await snapshot(t), before);
});

replay('given every kind of event, when the read models are emptied and rebuilt in one batch, then they equal the live ones', async ({ t }) => {
  const before = await snapshot(t);
  const { db, store } = t.platform.deps;
  await t.platform.deps.projections.stop();
  try {
    const rebuilt = new ProjectionRunner(store, db, [usersProjection, accessProjection, usergroupsProjection], pino({ level: 'silent' }), 'access-rebuild');
    await rebuilt.reset();
    await rebuilt.catchUp();
    assert.equal(await snapshot(t), before);
  } finally {
    await t.platform.deps.projections.start();
  }
});

replay.run();
