import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser, type GivenUser } from '../users/given.js';

const groups = suite<{ t: TestPlatform; owner: GivenUser; other: GivenUser; member: GivenUser }>('usergroups');

groups.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.owner = await givenUser(ctx.t, 'group-owner', { attributes: { roles: ['admin'] } });
  ctx.other = await givenUser(ctx.t, 'outsider', { attributes: { roles: ['admin'] } });
  ctx.member = await givenUser(ctx.t, 'member-one');
});
groups.after(async (ctx) => {
  await ctx.t.stop();
});

const create = async (t: TestPlatform, token: string, body: unknown) => t.call('POST', '/api/usergroups', { token, body });

groups('when a usergroup is created, then 201 with a 24-hex id, the creator as owner, and the members sent are not set', async ({ t, owner, member }) => {
  const res = await create(t, owner.token, { name: 'Field team', members: [member.id], appFilter: ['x'] });
  assert.is(res.status, 201, res.text);
  assert.match(res.body._id, /^[0-9a-f]{24}$/);
  assert.equal(res.body, { _id: res.body._id, name: 'Field team', owner: owner.id });
  const read = await t.call('GET', `/api/usergroups/${res.body._id}?includeMembers=true`, { token: owner.token });
  assert.equal(read.body.members, []);
  const [event] = await t.platform.deps.store.readStream(`usergroup-${res.body._id}`);
  assert.is(event!.metadata.actor, owner.id);
});

groups('when the name has 2 or 60 characters, then it is accepted; 1, 61, a number, an unknown field or no name, then 422 and nothing is written', async ({ t, owner }) => {
  assert.is((await create(t, owner.token, { name: 'ab' })).status, 201);
  assert.is((await create(t, owner.token, { name: 'x'.repeat(60) })).status, 201);
  const before = await eventCount(t);
  for (const [body, field] of [
    [{ name: 'a' }, 'name'],
    [{ name: 'x'.repeat(61) }, 'name'],
    [{ name: 42 }, 'name'],
    [{ name: '  ' }, 'name'],
    [{}, 'name'],
  ] as const) {
    const res = await create(t, owner.token, body);
    assert.is(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
    assert.match(res.text, new RegExp(`^ERR - .*${field}`));
  }
  assert.is(await eventCount(t), before);
});

groups('when a create names the caller as owner, then 201 owned by the caller; another user as owner, then 422 saying so and nothing is written', async ({ t, owner, other }) => {
  const mine = await create(t, owner.token, { name: 'Owned team', owner: owner.id.toUpperCase() });
  assert.is(mine.status, 201, mine.text);
  assert.is(mine.body.owner, owner.id);
  const before = await eventCount(t);
  for (const body of [{ name: 'Given away', owner: other.id }, { name: 'Nobody', owner: '00000000-0000-4000-8000-000000000000' }]) {
    const res = await create(t, owner.token, body);
    assert.is(res.status, 422, `${JSON.stringify(body)}: ${res.text}`);
    assert.match(res.text, /^ERR - owner must be you, the creator: a usergroup is created owned by its creator; hand it over afterwards with PATCH \/api\/usergroups\/\{id\} \{owner\}/);
  }
  assert.is(await eventCount(t), before);
});

groups('given a group, when members are added and removed, then includeMembers lists them; adding twice changes nothing', async ({ t, owner, member }) => {
  const { body: group } = await create(t, owner.token, { name: 'Crew' });
  const add = await t.call('POST', `/api/usergroups/${group._id}/members`, { token: owner.token, body: { userId: member.id } });
  assert.is(add.status, 201, add.text);
  assert.equal(add.body, { groupId: group._id, userId: member.id });
  const again = await t.call('POST', `/api/usergroups/${group._id}/members`, { token: owner.token, body: { userId: member.id } });
  assert.is(again.status, 200);
  const read = await t.call('GET', `/api/usergroups/${group._id}?includeMembers=true`, { token: owner.token });
  assert.equal(read.body.members, [{ id: member.id, username: 'member-one' }]);
  assert.is((await t.call('GET', `/api/usergroups/${group._id}`, { token: owner.token })).body.members, undefined);
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}/members/${member.id}`, { token: owner.token })).status, 204);
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}/members/${member.id}`, { token: owner.token })).status, 404);
  assert.equal((await t.call('GET', `/api/usergroups/${group._id}?includeMembers=true`, { token: owner.token })).body.members, []);
});

groups('when a member is not a user, not a UUID, or the body is wrong, then 422 and nothing is written', async ({ t, owner }) => {
  const { body: group } = await create(t, owner.token, { name: 'Strict' });
  const before = await eventCount(t);
  const members = `/api/usergroups/${group._id}/members`;
  const cases: [unknown, RegExp][] = [
    [{ userId: '00000000-0000-4000-8000-000000000000' }, /^ERR - userId is not a user$/],
    [{ userId: group._id }, /^ERR - userId /],
    [{ userId: 7 }, /^ERR - userId /],
    [{ user: owner.id }, /^ERR - /],
  ];
  for (const [body, message] of cases) {
    const res = await t.call('POST', members, { token: owner.token, body });
    assert.is(res.status, 422, res.text);
    assert.match(res.text, message);
  }
  assert.is((await t.call('DELETE', `${members}/${group._id}`, { token: owner.token })).status, 422, 'a group id where a user id belongs');
  assert.is((await t.call('GET', '/api/usergroups/not-an-id', { token: owner.token })).status, 422);
  assert.is(await eventCount(t), before);
});

groups('given a group, when it is renamed or handed to another owner, then the change shows; an owner who is no user is 422', async ({ t, owner, other }) => {
  const { body: group } = await create(t, owner.token, { name: 'Before' });
  const renamed = await t.call('PATCH', `/api/usergroups/${group._id}`, { token: owner.token, body: { name: 'After' } });
  assert.is(renamed.status, 200, renamed.text);
  assert.is(renamed.body.name, 'After');
  assert.is((await t.call('PATCH', `/api/usergroups/${group._id}`, { token: owner.token, body: {} })).status, 422);
  assert.is((await t.call('PATCH', `/api/usergroups/${group._id}`, { token: owner.token, body: { owner: '00000000-0000-4000-8000-000000000000' } })).status, 422);
  const handed = await t.call('PATCH', `/api/usergroups/${group._id}`, { token: owner.token, body: { owner: other.id } });
  assert.is(handed.body.owner, other.id);
});

groups('given a group of another user, when a caller without rights touches it, then 404 everywhere and the list leaves it out', async ({ t, owner, other }) => {
  const { body: group } = await create(t, owner.token, { name: 'Private' });
  for (const [method, path, body] of [
    ['GET', `/api/usergroups/${group._id}`, undefined],
    ['PATCH', `/api/usergroups/${group._id}`, { name: 'Mine now' }],
    ['DELETE', `/api/usergroups/${group._id}`, undefined],
    ['POST', `/api/usergroups/${group._id}/members`, { userId: other.id }],
  ] as const) {
    const res = await t.call(method, path, { token: other.token, body });
    assert.is(res.status, 404, `${method} ${path}: ${res.status}`);
  }
  const list = await t.call('GET', '/api/usergroups', { token: other.token });
  assert.not.ok(list.body.some((g: { _id: string }) => g._id === group._id));
  assert.ok((await t.call('GET', '/api/usergroups', { token: owner.token })).body.some((g: { _id: string }) => g._id === group._id));
});

groups('given a user added to a stranger\'s group, then the user sees the group in its list and by id, cannot change it, and can leave it', async ({ t, other, member }) => {
  const { body: group } = await create(t, other.token, { name: 'Imposed' });
  assert.is((await t.call('POST', `/api/usergroups/${group._id}/members`, { token: other.token, body: { userId: member.id } })).status, 201);
  const list = await t.call('GET', '/api/usergroups', { token: member.token });
  assert.ok(list.body.some((g: { _id: string }) => g._id === group._id), 'a member sees its group');
  assert.is((await t.call('GET', `/api/usergroups/${group._id}`, { token: member.token })).body.name, 'Imposed');
  const renamed = await t.call('PATCH', `/api/usergroups/${group._id}`, { token: member.token, body: { name: 'Mine' } });
  assert.ok(renamed.status === 403 || renamed.status === 404, renamed.text);
  const removed = await t.call('DELETE', `/api/usergroups/${group._id}/members/${other.id}`, { token: member.token });
  assert.ok(removed.status === 403 || removed.status === 404, 'a member removes only itself');
  assert.is((await t.call('GET', `/api/usergroups/${group._id}`, { token: other.token })).body.name, 'Imposed');
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}/membership`, { token: member.token })).status, 204);
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}/membership`, { token: member.token })).status, 404);
  assert.is((await t.call('GET', `/api/usergroups/${group._id}`, { token: member.token })).status, 404);
  assert.not.ok((await t.call('GET', '/api/usergroups', { token: member.token })).body.some((g: { _id: string }) => g._id === group._id));
});

groups('given a group with a member and rights, when it is deleted, then it, its members and every right on it and to it are gone', async ({ t, owner, member }) => {
  const { body: group } = await create(t, owner.token, { name: 'Doomed' });
  const { body: target } = await create(t, owner.token, { name: 'Shared with Doomed' });
  await t.call('POST', `/api/usergroups/${group._id}/members`, { token: owner.token, body: { userId: member.id } });
  await t.call('POST', '/api/access-rights', {
    token: owner.token,
    body: { resourceType: 'usergroup', resourceId: target._id, subjectType: 'group', subjectId: group._id, scope: ['read'] },
  });
  assert.is((await t.call('GET', `/api/usergroups/${target._id}`, { token: member.token })).status, 200);
  assert.is((await t.call('DELETE', `/api/usergroups/${group._id}`, { token: owner.token })).status, 204);
  assert.is((await t.call('GET', `/api/usergroups/${group._id}`, { token: owner.token })).status, 404);
  assert.is((await t.call('GET', `/api/usergroups/${target._id}`, { token: member.token })).status, 404);
  const { db } = t.platform.deps;
  assert.equal(await db.selectFrom('access_rights').selectAll().where('resource_id', '=', group._id).execute(), []);
  assert.equal(await db.selectFrom('access_rights').selectAll().where('subject_id', '=', group._id).execute(), []);
  assert.equal(await db.selectFrom('usergroup_members').selectAll().where('group_id', '=', group._id).execute(), []);
});

groups('given a member, when the user is deleted, then the membership goes', async ({ t, owner }) => {
  const leaver = await givenUser(t, 'leaver');
  const { body: group } = await create(t, owner.token, { name: 'Left behind' });
  await t.call('POST', `/api/usergroups/${group._id}/members`, { token: owner.token, body: { userId: leaver.id } });
  await t.call('DELETE', `/api/users/${leaver.id}`);
  assert.equal((await t.call('GET', `/api/usergroups/${group._id}?includeMembers=true`, { token: owner.token })).body.members, []);
});

groups.run();
