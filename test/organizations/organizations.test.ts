import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { assertNothingWritten } from '../security/given.js';

interface Ctx {
  t: TestPlatform;
  olga: GivenUser;
}

const test = suite<Ctx>('organizations: units, the tree, members');

test.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const role = await ctx.t.call('POST', '/api/roles', {
    body: { name: 'orgAdmin', permissions: { organization: ['GET', 'POST', 'PUT', 'DELETE'], log: ['GET'], device: ['GET'], accessRight: ['GET', 'POST', 'DELETE'] } },
  });
  assert.is(role.status, 201, role.text);
  ctx.olga = await givenUser(ctx.t, 'olga', { attributes: { roles: ['orgAdmin'] } });
});
test.after(async (ctx) => {
  await ctx.t.stop();
});

async function unit(t: TestPlatform, name: string, parent?: string, token = t.adminToken): Promise<string> {
  const res = await t.call('POST', '/api/organizations', { token, body: { name, ...(parent ? { parent } : {}) } });
  assert.is(res.status, 201, `${name}: ${res.text}`);
  return res.body._id;
}

async function member(t: TestPlatform, unitId: string, username: string, token = t.adminToken, extra: Record<string, unknown> = {}): Promise<GivenUser> {
  const res = await t.call('POST', `/api/organizations/${unitId}/members`, { token, body: { username, ...extra } });
  assert.is(res.status, 201, `${username}: ${res.text}`);
  return { id: res.body.id, username, password: res.body.temporaryPassword, token: await t.login(username, res.body.temporaryPassword) };
}

test('given a tree Acme > Sales > Nordic, when Acme is given read on a device, then members of Acme and of every unit below it read it, and nobody else', async ({ t }) => {
  const acme = await unit(t, 'Acme');
  const sales = await unit(t, 'Acme Sales', acme);
  const nordic = await unit(t, 'Acme Nordic', sales);
  const globex = await unit(t, 'Globex');
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'Shared meter' } })).body._id;
  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device, subjectType: 'orgUnit', subjectId: 'Acme', scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  const mia = await member(t, nordic, 'mia');
  const pat = await member(t, acme, 'pat');
  const gus = await member(t, globex, 'gus');
  for (const [who, status] of [[mia, 200], [pat, 200], [gus, 404]] as const) {
    assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: who.token })).status, status, who.username);
  }
  const mine = await t.call('GET', `/api/access-rights/resource/${device}/mine`, { token: mia.token });
  assert.equal(mine.body.scope, ['read']);

  // Rights go down the tree to the members below, never up.
  const nordicOnly = (await t.call('POST', '/api/iotnodes', { body: { name: 'Nordic meter' } })).body._id;
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: nordicOnly, subjectType: 'orgUnit', subjectId: 'Acme Nordic', scope: ['read'] } });
  assert.is((await t.call('GET', `/api/iotnodes/${nordicOnly}`, { token: mia.token })).status, 200);
  assert.is((await t.call('GET', `/api/iotnodes/${nordicOnly}`, { token: pat.token })).status, 404);
  const listed = await t.call('GET', '/api/iotnodes?options=count', { token: mia.token });
  assert.is(listed.headers.get('x-total-count'), '2');

  // Moved below Globex, Sales' members hold Globex's rights and no longer Acme's.
  const moved = await t.call('PUT', `/api/organizations/${sales}`, { body: { name: 'Acme Sales', parent: globex } });
  assert.is(moved.status, 200, moved.text);
  assert.is(moved.body.parent, globex);
  assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: mia.token })).status, 404);
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device, subjectType: 'orgUnit', subjectId: 'Globex', scope: ['read', 'write'] } });
  assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: mia.token })).status, 200);
  assert.equal((await t.call('GET', `/api/access-rights/resource/${device}/mine`, { token: mia.token })).body.scope, ['read', 'write']);
  const tree = await t.platform.deps.db.selectFrom('organization_tree').select(['unit_name', 'ancestor_name', 'depth']).where('unit_id', '=', nordic).orderBy('depth').execute();
  assert.equal(tree, [
    { unit_name: 'Acme Nordic', ancestor_name: 'Acme Nordic', depth: 0 },
    { unit_name: 'Acme Nordic', ancestor_name: 'Acme Sales', depth: 1 },
    { unit_name: 'Acme Nordic', ancestor_name: 'Globex', depth: 2 },
  ]);
});

test('given a name used only in users\' attributes and rights (no unit), then those rights keep working; only a platform admin may create a unit of that name', async ({ t, olga }) => {
  const legacy = await givenUser(t, 'lena', { attributes: { organization: ['Legacy'] } });
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'Legacy meter' } })).body._id;
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device, subjectType: 'orgUnit', subjectId: 'Legacy', scope: ['read'] } });
  assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: legacy.token })).status, 200);
  const squat = await t.call('POST', '/api/organizations', { token: olga.token, body: { name: 'legacy' } });
  assert.is(squat.status, 422, squat.text);
  assert.match(squat.text, /^ERR - name is already used in access rights or by users/);
  await assertNothingWritten(t, squat);
  const adopted = await unit(t, 'Legacy');
  const members = await t.call('GET', `/api/organizations/${adopted}/members`);
  assert.equal(members.body.map((m: { username: string }) => m.username), ['lena']);
  assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: legacy.token })).status, 200);
});

test('when a name is taken (any case), changed, or empty, then 409 or 422 and nothing is written', async ({ t }) => {
  await unit(t, 'Initech');
  const taken = await t.call('POST', '/api/organizations', { body: { name: 'INITECH' } });
  assert.is(taken.status, 409);
  await assertNothingWritten(t, taken);
  const id = await unit(t, 'Hooli');
  const renamed = await t.call('PUT', `/api/organizations/${id}`, { body: { name: 'Hooli XYZ' } });
  assert.is(renamed.status, 422);
  assert.match(renamed.text, /^ERR - name cannot be changed/);
  await assertNothingWritten(t, renamed);
  for (const name of ['', ' Hooli', 'x'.repeat(101)]) {
    const res = await t.call('POST', '/api/organizations', { body: { name } });
    assert.is(res.status, 422, name);
    await assertNothingWritten(t, res);
  }
  const described = await t.call('PUT', `/api/organizations/${id}`, { body: { name: 'Hooli', description: 'Search' } });
  assert.is(described.status, 200);
  assert.is(described.body.description, 'Search');
  assert.is(described.body.parent, null, 'left out, the parent stays');
});

test('when a move would put a unit below itself or the tree past 10 levels, then 422 and nothing is written', async ({ t }) => {
  const chain = [await unit(t, 'L1')];
  for (let level = 2; level <= 10; level++) chain.push(await unit(t, `L${level}`, chain[chain.length - 1]));
  const tooDeep = await t.call('POST', '/api/organizations', { body: { name: 'L11', parent: chain[9] } });
  assert.is(tooDeep.status, 422);
  assert.match(tooDeep.text, /^ERR - parent is too deep: a tree has at most 10 levels/);
  await assertNothingWritten(t, tooDeep);
  for (const parent of [chain[0], chain[5]]) {
    const cycle = await t.call('PUT', `/api/organizations/${chain[0]}`, { body: { name: 'L1', parent } });
    assert.is(cycle.status, 422, cycle.text);
    assert.match(cycle.text, /^ERR - parent (is the unit itself or one of its sub-units|cannot be the unit itself)/);
    await assertNothingWritten(t, cycle);
  }
  const side = await unit(t, 'Side');
  const branch = await unit(t, 'Branch', side);
  // Branch (1 level below Side) under L9 would reach level 11.
  const deeper = await t.call('PUT', `/api/organizations/${side}`, { body: { name: 'Side', parent: chain[8] } });
  assert.is(deeper.status, 422);
  await assertNothingWritten(t, deeper);
  assert.is((await t.call('PUT', `/api/organizations/${side}`, { body: { name: 'Side', parent: chain[7] } })).status, 200);
  assert.is((await t.call('GET', `/api/organizations?parent=${side}`)).body[0]._id, branch);
  const unknown = await t.call('POST', '/api/organizations', { body: { name: 'Orphan', parent: 'cccccccccccccccccccccccc' } });
  assert.is(unknown.status, 422);
  assert.match(unknown.text, /^ERR - parent is not an organization unit you can see/);
});

test('given a unit with sub-units or members, when it is deleted, then 409; empty, then 204 and the rights given to its name go with it', async ({ t }) => {
  const top = await unit(t, 'Umbrella');
  const sub = await unit(t, 'Umbrella Labs', top);
  assert.is((await t.call('DELETE', `/api/organizations/${top}`)).status, 409);
  const ada = await member(t, sub, 'ada');
  assert.is((await t.call('DELETE', `/api/organizations/${sub}`)).status, 409);
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'Lab meter' } })).body._id;
  await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device, subjectType: 'orgUnit', subjectId: 'Umbrella Labs', scope: ['read'] } });
  assert.is((await t.call('DELETE', `/api/organizations/${sub}/members/${ada.id}`)).status, 204);
  assert.is((await t.call('DELETE', `/api/organizations/${sub}`)).status, 204);
  assert.is((await t.call('GET', `/api/organizations/${sub}`)).status, 404);
  const left = await t.platform.deps.db.selectFrom('access_rights').selectAll().where('subject_type', '=', 'orgUnit').where('subject_id', '=', 'Umbrella Labs').execute();
  assert.equal(left, []);
  assert.is((await t.call('DELETE', `/api/organizations/${top}`)).status, 204);
});

test('given an organization admin (custom role), when they create members, then each logs in with a one-time password; roles they lack are 403', async ({ t, olga }) => {
  const fresh = await unit(t, 'Fresh Co', undefined, olga.token);
  const kim = await member(t, fresh, 'kim', olga.token, { firstName: 'Kim', email: 'kim@example.com', attributes: { roles: ['orgAdmin'], language: 'sv' } });
  const me = await t.call('GET', `/api/users/${kim.id}`);
  assert.equal(me.body.attributes, { roles: ['orgAdmin'], language: 'sv', organization: ['Fresh Co'] });
  assert.equal(me.body.requiredActions, ['UPDATE_PASSWORD']);
  for (const roles of [['admin'], ['viewerBasic']]) {
    const res = await t.call('POST', `/api/organizations/${fresh}/members`, { token: olga.token, body: { username: `x-${roles[0]}`, attributes: { roles } } });
    assert.is(res.status, 403, res.text);
    await assertNothingWritten(t, res);
  }
  const badField = await t.call('POST', `/api/organizations/${fresh}/members`, { token: olga.token, body: { username: 'y', attributes: { organization: ['Acme'] } } });
  assert.is(badField.status, 422);
  assert.is((await t.call('POST', `/api/organizations/${fresh}/members`, { token: olga.token, body: { username: 'kim' } })).status, 409);
  const listed = await t.call('GET', `/api/organizations/${fresh}/members`, { token: olga.token });
  assert.equal(listed.body, [{ id: kim.id, username: 'kim', firstName: 'Kim', email: 'kim@example.com', enabled: true, organization: ['Fresh Co'] }]);
  const sub = await unit(t, 'Fresh Sub', fresh, olga.token);
  const sam = await member(t, sub, 'sam', olga.token);
  const all = await t.call('GET', `/api/organizations/${fresh}/members?includeDescendants=true`, { token: olga.token });
  assert.equal(all.body.map((m: { id: string }) => m.id), [kim.id, sam.id]);
  assert.is((await t.call('GET', `/api/organizations/${fresh}/members`, { token: kim.token })).status, 404, 'a member cannot read the unit without a right on it');
  const counted = await t.call('GET', '/api/organizations?options=count&limit=1', { token: olga.token });
  assert.is(counted.headers.get('x-total-count'), '2');
});

test('given members, when the organization admin resets a password, then the old one stops working; a platform admin, a member of another unit or a non-member are refused', async ({ t, olga }) => {
  const org = await unit(t, 'Reset Co', undefined, olga.token);
  const ron = await member(t, org, 'ron', olga.token);
  const reset = await t.call('POST', `/api/organizations/${org}/members/${ron.id}/reset-password`, { token: olga.token });
  assert.is(reset.status, 200, reset.text);
  assert.match(reset.body.temporaryPassword, /^\S{12,}$/);
  assert.is((await t.call('POST', '/api/auth/local', { token: null, body: { username: 'ron', password: ron.password } })).status, 401);
  await t.login('ron', reset.body.temporaryPassword);

  // A platform admin adds Ron to a unit Olga does not administer: his password is no longer hers to reset.
  const other = await unit(t, 'Other Co');
  const added = await t.call('PUT', `/api/organizations/${other}/members/${ron.id}`);
  assert.is(added.status, 201, added.text);
  assert.equal(added.body.organization, ['Reset Co', 'Other Co']);
  assert.is((await t.call('PUT', `/api/organizations/${other}/members/${ron.id}`)).status, 200);
  const refused = await t.call('POST', `/api/organizations/${org}/members/${ron.id}/reset-password`, { token: olga.token });
  assert.is(refused.status, 403);
  await assertNothingWritten(t, refused);
  assert.is((await t.call('PUT', `/api/organizations/${org}/members/${ron.id}`, { token: olga.token })).status, 403, 'adding existing users is for platform admins');

  const boss = await givenUser(t, 'boss', { attributes: { roles: ['admin'], organization: ['Reset Co'] } });
  assert.is((await t.call('POST', `/api/organizations/${org}/members/${boss.id}/reset-password`, { token: olga.token })).status, 403);
  const outsider = await givenUser(t, 'outsider');
  assert.is((await t.call('POST', `/api/organizations/${org}/members/${outsider.id}/reset-password`, { token: olga.token })).status, 404);

  assert.is((await t.call('DELETE', `/api/organizations/${other}/members/${ron.id}`)).status, 204);
  assert.is((await t.call('POST', `/api/organizations/${org}/members/${ron.id}/reset-password`, { token: olga.token })).status, 200, 'back to one unit, hers again');
  assert.is((await t.call('DELETE', `/api/organizations/${org}/members/${ron.id}`, { token: olga.token })).status, 204);
  assert.is((await t.call('DELETE', `/api/organizations/${org}/members/${ron.id}`, { token: olga.token })).status, 404);
  assert.is((await t.call('POST', `/api/organizations/${org}/members/${ron.id}/reset-password`, { token: olga.token })).status, 404);
});

test('given what happened to a unit, when its admin reads the logs widget\'s query, then each change is there with the widget\'s type, priority and category', async ({ t, olga }) => {
  const org = await unit(t, 'Logged Co', undefined, olga.token);
  const sub = await unit(t, 'Logged Sub', org, olga.token);
  const liv = await member(t, org, 'liv', olga.token);
  const reset = await t.call('POST', `/api/organizations/${org}/members/${liv.id}/reset-password`, { token: olga.token });
  await t.call('DELETE', `/api/organizations/${org}/members/${liv.id}`, { token: olga.token });
  await t.call('PUT', `/api/organizations/${sub}`, { token: olga.token, body: { name: 'Logged Sub', parent: null } });
  const logs = await t.call('GET', `/api/logs?resourceType=organization&resourceId=${org}`, { token: olga.token });
  assert.is(logs.status, 200, logs.text);
  const seen = logs.body.logs.map((l: { message: string; type: string; priority: string; category: string }) => `${l.message} | ${l.type} ${l.priority} ${l.category}`).reverse();
  assert.equal(seen, [
    'Unit Logged Co created | info low update',
    'Sub-unit Logged Sub created | info low update',
    `Member liv (${liv.id}) created | info medium access`,
    `Password of member liv (${liv.id}) reset | info high access`,
    `Member liv (${liv.id}) removed | info medium access`,
  ]);
  const widget = await t.call('GET', `/api/logs?resourceType=organization&resourceId=${org}&type=info&priority=high,severe&category=access`, { token: olga.token });
  assert.equal(widget.body.logs.map((l: { message: string }) => l.message), [`Password of member liv (${liv.id}) reset`]);
  const moved = await t.call('GET', `/api/logs?resourceType=organization&resourceId=${sub}`, { token: olga.token });
  assert.equal(moved.body.logs[0].message, 'Moved to the top of the tree');
  // The reset ended Liv's token: she reads with one from her temporary password.
  const livNow = await t.login('liv', reset.body.temporaryPassword);
  assert.is((await t.call('GET', `/api/logs?resourceType=organization&resourceId=${org}`, { token: livNow })).body.logs.length, 0, 'others do not read it');
});

test.run();
