import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser, type GivenUser } from '../users/given.js';

interface Ctx {
  t: TestPlatform;
  alice: GivenUser;
  bob: GivenUser;
}
const rights = suite<Ctx>('access rights');

rights.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  // Admins pass the role check everywhere, so these tests see the object check alone.
  ctx.alice = await givenUser(ctx.t, 'alice', { attributes: { roles: ['admin'] } });
  ctx.bob = await givenUser(ctx.t, 'bob', { attributes: { roles: ['admin'] } });
});
rights.after(async (ctx) => {
  await ctx.t.stop();
});

async function groupOf(t: TestPlatform, owner: GivenUser, name: string): Promise<string> {
  const res = await t.call('POST', '/api/usergroups', { token: owner.token, body: { name } });
  assert.is(res.status, 201, res.text);
  return res.body._id;
}

const record = (resourceId: string, subjectType: string, subjectId: string, scope?: string[]) => ({
  resourceType: 'usergroup',
  resourceId,
  subjectType,
  subjectId,
  ...(scope ? { scope } : {}),
});

const grant = (t: TestPlatform, token: string, body: unknown) => t.call('POST', '/api/access-rights', { token, body });
const revoke = (t: TestPlatform, token: string, body: unknown) => t.call('DELETE', '/api/access-rights', { token, body });
const see = async (t: TestPlatform, who: GivenUser, id: string) => (await t.call('GET', `/api/usergroups/${id}`, { token: who.token })).status;
const rename = async (t: TestPlatform, who: GivenUser, id: string) =>
  (await t.call('PATCH', `/api/usergroups/${id}`, { token: who.token, body: { name: `renamed by ${who.username}` } })).status;

rights('when a resource is created, then its creator holds admin, write, read and peek on it', async ({ t, alice }) => {
  const id = await groupOf(t, alice, 'created');
  const res = await t.call('GET', `/api/access-rights/resource/${id}`, { token: alice.token });
  assert.is(res.status, 200);
  assert.equal(res.body, [record(id, 'singleton', alice.id, ['admin', 'write', 'read', 'peek'])]);
});

rights('given no right, when another user reads or writes, then 404; given read, GET works and a write is 403; given write, both work', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'shared');
  assert.is(await see(t, bob, id), 404);
  assert.is(await rename(t, bob, id), 404);
  assert.is((await grant(t, alice.token, record(id, 'singleton', bob.id, ['read']))).status, 201);
  assert.is(await see(t, bob, id), 200);
  assert.is(await rename(t, bob, id), 403);
  assert.ok((await t.call('GET', '/api/usergroups', { token: bob.token })).body.some((g: { _id: string }) => g._id === id));
  const regrant = await grant(t, alice.token, record(id, 'user', bob.id, ['write']));
  assert.is(regrant.status, 201);
  assert.equal(regrant.body, record(id, 'singleton', bob.id, ['write']), 'user is an alias of singleton');
  assert.is(await rename(t, bob, id), 200);
});

rights('when a subject is granted again, then the new scope replaces the old one', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'replace');
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['write', 'read']));
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['peek']));
  const res = await t.call('GET', `/api/access-rights/resource/${id}?resourceType=usergroup`, { token: alice.token });
  assert.equal(res.body.find((r: { subjectId: string }) => r.subjectId === bob.id).scope, ['peek']);
  assert.is(await see(t, bob, id), 404, 'peek alone does not open the content');
});

rights('when scopes are revoked, then only the named ones go; with none named, the record goes', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'revoke');
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['write', 'read']));
  assert.is((await revoke(t, alice.token, record(id, 'singleton', bob.id, ['write']))).status, 204);
  assert.is(await see(t, bob, id), 200);
  assert.is(await rename(t, bob, id), 403);
  assert.is((await revoke(t, alice.token, record(id, 'singleton', bob.id))).status, 204);
  assert.is(await see(t, bob, id), 404);
  const rows = (await t.call('GET', `/api/access-rights/resource/${id}`, { token: alice.token })).body;
  assert.equal(rows.map((r: { subjectId: string }) => r.subjectId), [alice.id]);
});

rights('given read but not admin, when granting or revoking or listing the rights, then 403; given nothing, 404', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'guarded');
  const carl = await givenUser(t, 'carl', { attributes: { roles: ['admin'] } });
  assert.is((await grant(t, bob.token, record(id, 'singleton', bob.id, ['admin']))).status, 404);
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['read', 'write']));
  const res = await grant(t, bob.token, record(id, 'singleton', carl.id, ['read']));
  assert.is(res.status, 403);
  assert.is(res.text, 'Forbidden');
  assert.is((await revoke(t, bob.token, record(id, 'singleton', alice.id))).status, 403);
  assert.is((await t.call('GET', `/api/access-rights/resource/${id}`, { token: bob.token })).status, 403);
  assert.is(await see(t, carl, id), 404);
});

rights('given rights given to a group, when a user is a member, then the rights apply; once removed, they do not', async ({ t, alice, bob }) => {
  const team = await groupOf(t, alice, 'team');
  const resource = await groupOf(t, alice, 'team resource');
  await t.call('POST', `/api/usergroups/${team}/members`, { token: alice.token, body: { userId: bob.id } });
  assert.is(await see(t, bob, resource), 404);
  assert.is((await grant(t, alice.token, record(resource, 'group', team, ['write']))).status, 201);
  assert.is(await see(t, bob, resource), 200);
  assert.is(await rename(t, bob, resource), 200);
  await t.call('DELETE', `/api/usergroups/${team}/members/${bob.id}`, { token: alice.token });
  assert.is(await see(t, bob, resource), 404);
});

rights('given rights given to an organization unit, when a user belongs to it, then the rights apply', async ({ t, alice }) => {
  const resource = await groupOf(t, alice, 'org resource');
  const dora = await givenUser(t, 'dora', { attributes: { organization: ['acme'], roles: ['viewerBasic'] } });
  assert.is(await see(t, dora, resource), 404);
  assert.is((await grant(t, alice.token, record(resource, 'orgUnit', 'acme', ['read']))).status, 201);
  assert.is(await see(t, dora, resource), 200);
});

rights('when the two id kinds are swapped, the scope or ids are malformed, or fields are unknown, then 422 and nothing is written', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'strict');
  const team = await groupOf(t, alice, 'strict team');
  const before = await eventCount(t);
  const cases: [unknown, RegExp][] = [
    [record(id, 'singleton', team, ['read']), /^ERR - subjectId must be a user UUID/],
    [record(id, 'user', team, ['read']), /^ERR - subjectId must be a user UUID/],
    [record(id, 'group', bob.id, ['read']), /^ERR - subjectId must be a 24-character hexadecimal usergroup id/],
    [record(id, 'singleton', '00000000-0000-4000-8000-000000000000', ['read']), /^ERR - subjectId is not a user$/],
    [record(id, 'group', '0123456789abcdef01234567', ['read']), /^ERR - subjectId is not a usergroup$/],
    [record(id, 'team', bob.id, ['read']), /^ERR - subjectType /],
    [record(id, 'singleton', bob.id, ['owner']), /^ERR - scope.0 /],
    [record(id, 'singleton', bob.id, []), /^ERR - scope /],
    [record(id, 'singleton', bob.id, 'read' as never), /^ERR - scope /],
    [record(bob.id, 'singleton', bob.id, ['read']), /^ERR - resourceId /],
    [{ ...record(id, 'singleton', bob.id, ['read']), resourceType: 'dashboard' }, /^ERR - resourceType does not match the resource, which is a usergroup$/],
    [{ ...record(id, 'singleton', bob.id, ['read']), note: 'x' }, /^ERR - /],
    [record(id, 'singleton', bob.id), /^ERR - .*scope/],
  ];
  for (const [body, message] of cases) {
    const res = await grant(t, alice.token, body);
    assert.is(res.status, 422, `${JSON.stringify(body)}: ${res.status} ${res.text}`);
    assert.match(res.text, message);
  }
  const swapped = await revoke(t, alice.token, record(id, 'group', bob.id));
  assert.is(swapped.status, 422);
  assert.is(await eventCount(t), before);
  assert.is(await see(t, bob, id), 404);
});

rights('when rights are listed by subject, then a user sees their own, an admin anyone; group ids and user ids are not interchangeable', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'by subject');
  const team = await groupOf(t, alice, 'by subject team');
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['read']));
  await grant(t, alice.token, record(id, 'group', team, ['write']));
  const mine = await t.call('GET', `/api/access-rights/subject/${bob.id}`, { token: bob.token });
  assert.is(mine.status, 200);
  assert.ok(mine.body.some((r: { resourceId: string; scope: string[] }) => r.resourceId === id && r.scope.join() === 'read'));
  const eve = await givenUser(t, 'eve');
  assert.is((await t.call('GET', `/api/access-rights/subject/${bob.id}`, { token: eve.token })).status, 404);
  const ofTeam = await t.call('GET', `/api/access-rights/subject/${team}?subjectType=group`, { token: alice.token });
  assert.equal(ofTeam.body, [record(id, 'group', team, ['write'])]);
  assert.is((await t.call('GET', `/api/access-rights/subject/${team}?subjectType=group`, { token: eve.token })).status, 404);
  assert.is((await t.call('GET', `/api/access-rights/subject/${team}`, { token: alice.token })).status, 422, 'a group id as a user');
  assert.is((await t.call('GET', `/api/access-rights/subject/${bob.id}?subjectType=group`, { token: alice.token })).status, 422);
  assert.is((await t.call('GET', `/api/access-rights/subject/${bob.id}?subjectType=singleton`, { token: alice.token })).status, 422);
  assert.is((await t.call('GET', `/api/access-rights/subject/nobody`, { token: alice.token })).status, 422);
});

rights('when access is granted, then an AccessGranted event on the resource stream names the granting user', async ({ t, alice, bob }) => {
  const id = await groupOf(t, alice, 'audited');
  await grant(t, alice.token, record(id, 'singleton', bob.id, ['read']));
  const [event] = await t.platform.deps.store.readStream(`access-${id}`);
  assert.is(event!.type, 'AccessGranted');
  assert.is(event!.metadata.actor, alice.id);
  assert.equal(event!.data, { ...record(id, 'user', bob.id, ['read']), at: (event!.data as { at: string }).at });
});

rights('given a user with rights, when the user is deleted, then their rights go', async ({ t, alice }) => {
  const id = await groupOf(t, alice, 'outlived');
  const fred = await givenUser(t, 'fred');
  await grant(t, alice.token, record(id, 'singleton', fred.id, ['read']));
  await t.call('DELETE', `/api/users/${fred.id}`);
  const rows = (await t.call('GET', `/api/access-rights/resource/${id}`, { token: alice.token })).body;
  assert.equal(rows.map((r: { subjectId: string }) => r.subjectId), [alice.id]);
});

rights.run();
