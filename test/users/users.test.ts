import { sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser } from './given.js';
import { eventually } from '../ingest/support.js';
import { verifyPassword } from '../../domain/users/password.js';
import { verifyToken } from '../../domain/access/tokens.js';
import { refusing } from '../support/refusing.js';
import { handle } from '../../domain/shared/decider.js';
import { ConflictError } from '../../domain/shared/errors.js';
import { userDecider, userStream } from '../../domain/users/user.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const users = suite<{ t: TestPlatform }>('users');

users.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
users.after(async (ctx) => {
  await ctx.t.stop();
});

const noSecrets = (text: string) => assert.not.match(text, /password_hash|passwordHash|scrypt\$/);

users('when an admin creates a user with only a username, then 201 with a UUID, a one-time temporary password and UPDATE_PASSWORD', async ({ t }) => {
  const res = await t.call('POST', '/api/users', { body: { username: 'alice' } });
  assert.is(res.status, 201, res.text);
  assert.match(res.body.id, UUID);
  assert.type(res.body.temporaryPassword, 'string');
  assert.ok(res.body.temporaryPassword.length >= 8);
  assert.equal(res.body.requiredActions, ['UPDATE_PASSWORD']);
  assert.is(res.body.enabled, true);
  noSecrets(res.text);
  const read = await t.call('GET', `/api/users/${res.body.id}`);
  assert.is(read.status, 200);
  assert.is(read.body.temporaryPassword, undefined, 'the temporary password is shown once');
  noSecrets(read.text);
});

users('when a user is created with every field, then they come back as sent', async ({ t }) => {
  const body = {
    username: 'bob',
    email: 'bob@example.com',
    firstName: 'Bob',
    lastName: 'Builder',
    phoneNumber: '+4915112345678',
    attributes: { globalVisibility: 'true', language: 'de', organization: ['acme'], roles: ['editor'] },
  };
  const res = await t.call('POST', '/api/users', { body });
  assert.is(res.status, 201, res.text);
  const { id, temporaryPassword, createdTimestamp, requiredActions, enabled, ...rest } = res.body;
  assert.equal(rest, body);
});

users('when a user is created, then the event names the admin as actor', async ({ t }) => {
  const admin = (await t.call('GET', `/api/users?username=${ADMIN.username}`)).body[0];
  const res = await t.call('POST', '/api/users', { body: { username: 'audited' } });
  const [event] = await t.platform.deps.store.readStream(`user-${res.body.id}`);
  assert.is(event!.type, 'UserCreated');
  assert.is(event!.metadata.actor, admin.id);
  assert.is(event!.metadata.correlationId, res.headers.get('x-request-id'));
});

users('given a new user, when they set their own password, then UPDATE_PASSWORD is cleared and only the new password logs in', async ({ t }) => {
  const carol = await givenUser(t, 'carol');
  const res = await t.call('PUT', '/api/auth/password', { token: carol.token, body: { currentPassword: carol.password, newPassword: 'carols-own-secret' } });
  assert.is(res.status, 200, res.text);
  const me = await t.call('GET', `/api/users/${carol.id}`, { token: res.body.token });
  assert.equal(me.body.requiredActions, []);
  assert.ok(await t.login('carol', 'carols-own-secret'));
  const old = await t.call('POST', '/api/auth/local', { token: null, body: { username: 'carol', password: carol.password } });
  assert.is(old.status, 401);
});

users('when the current password is wrong or the new one is shorter than 8 characters, then 422 and the password stays', async ({ t }) => {
  const dave = await givenUser(t, 'dave');
  const wrong = await t.call('PUT', '/api/auth/password', { token: dave.token, body: { currentPassword: 'not-it', newPassword: 'long-enough-1' } });
  assert.is(wrong.status, 422);
  assert.is(wrong.text, 'ERR - currentPassword is not correct');
  const short = await t.call('PUT', '/api/auth/password', { token: dave.token, body: { currentPassword: dave.password, newPassword: '1234567' } });
  assert.is(short.status, 422);
  assert.match(short.text, /^ERR - newPassword /);
  assert.ok(await t.login('dave', dave.password));
});

users('when the username is missing, of the wrong type, or the body has unknown or malformed fields, then 422 and nothing is written', async ({ t }) => {
  const before = await eventCount(t);
  const cases: [unknown, RegExp][] = [
    [{}, /^ERR - .*username/],
    [{ username: 42 }, /^ERR - username /],
    [{ username: 'x', password: 'secret' }, /^ERR - .*password/],
    [{ username: 'x', enabled: 'yes' }, /^ERR - enabled /],
    [{ username: 'x', phoneNumber: '0151 123' }, /^ERR - phoneNumber /],
    [{ username: 'x', email: 'not-an-email' }, /^ERR - email /],
    [{ username: 'x', attributes: { globalVisibility: false } }, /^ERR - attributes.globalVisibility /],
    [{ username: 'x', attributes: { roles: ['wizard'] } }, /^ERR - attributes.roles.0 wizard is not a role$/],
    [{ username: 'x', attributes: { shoeSize: 42 } }, /^ERR - attributes/],
    [{ username: 'has space' }, /^ERR - username /],
  ];
  for (const [body, message] of cases) {
    const res = await t.call('POST', '/api/users', { body });
    assert.is(res.status, 422, `${JSON.stringify(body)} → ${res.status} ${res.text}`);
    assert.match(res.text, message);
  }
  assert.is(await eventCount(t), before);
  assert.equal((await t.call('GET', '/api/users?username=x')).body.filter((u: { username: string }) => u.username === 'x'), []);
});

users('when a username is taken in any case, then 409 and the first user is unchanged', async ({ t }) => {
  await givenUser(t, 'erin', { firstName: 'Erin' });
  const res = await t.call('POST', '/api/users', { body: { username: 'ERIN', firstName: 'Other' } });
  assert.is(res.status, 409);
  const found = (await t.call('GET', '/api/users?username=erin')).body;
  assert.is(found.length, 1);
  assert.is(found[0].firstName, 'Erin');
});

users('when a username differs from a taken one only in a letter PostgreSQL and JavaScript fold differently (İ), then it is a name of its own: created, shown, and each logs in as itself', async ({ t }) => {
  const erik = await givenUser(t, 'erik');
  // JavaScript's lower case of İ is i + U+0307, PostgreSQL's (C.UTF-8) is i: the claim and the read model must agree.
  const other = await givenUser(t, 'erİk');
  assert.is.not(other.id, erik.id);
  assert.is((await t.call('GET', `/api/users/${other.id}`)).body.username, 'erİk');
  const secret = t.platform.deps.jwtSecret;
  assert.is(verifyToken(secret, await t.login('erik', erik.password))?.userId, erik.id);
  assert.is(verifyToken(secret, await t.login('ERİK', other.password))?.userId, other.id);
  const again = await t.call('POST', '/api/users', { body: { username: 'ERİK' } });
  assert.is(again.status, 409, again.text);
  const parked = await t.platform.deps.db.selectFrom('es.parked_events' as any).select('event_id').execute();
  assert.equal(parked, []);
});

users('when the database refuses a new user after its username was claimed, then the name is given back: the same username can be created next', async ({ t }) => {
  // Given the next UserCreated refused by the database, once,
  await refusing(t.platform.deps.db, 'es.events', `NEW.type = 'UserCreated'`, async () => {
    // when a user is created, it fails;
    const failed = await t.call('POST', '/api/users', { body: { username: 'gwen' } });
    assert.is(failed.status, 500, failed.text);
    // then the name is free again.
    const created = await t.call('POST', '/api/users', { body: { username: 'Gwen' } });
    assert.is(created.status, 201, created.text);
    assert.is((await t.call('GET', `/api/users/${created.body.id}`)).body.username, 'Gwen');
  });
});

users('given a deleted user whose name the database failed to release, when a user of that name is created, then it is created', async ({ t }) => {
  const hal = await givenUser(t, 'hal');
  await refusing(t.platform.deps.db, 'es.events', `NEW.type = 'UsernameReleased'`, async () => {
    const deleted = await t.call('DELETE', `/api/users/${hal.id}`);
    assert.is(deleted.status, 500, deleted.text);
  }, Infinity);
  await eventually(async () => (await t.call('GET', `/api/users/${hal.id}`)).status === 404, 5000, 'the deletion in the read models');
  const again = await t.call('POST', '/api/users', { body: { username: 'HAL' } });
  assert.is(again.status, 201, again.text);
  assert.is.not(again.body.id, hal.id);
  const taken = await t.call('POST', '/api/users', { body: { username: 'hal' } });
  assert.is(taken.status, 409, 'a live user\'s name stays taken');
});

users('given a username whose claim outlived a creation that was never stored (its user and the claim\'s release both refused, as a crash between the two appends leaves it), when a user of that name is created, then it is created and the first holder can never be', async ({ t }) => {
  // Given: the user refused after the claim, and the release of the claim refused too.
  await refusing(t.platform.deps.db, 'es.events', `NEW.type IN ('UserCreated', 'UsernameReleased')`, async () => {
    const failed = await t.call('POST', '/api/users', { body: { username: 'uma' } });
    assert.is(failed.status, 500, failed.text);
  }, 2);
  const [claimed] = await t.platform.deps.store.readStream('username-uma');
  const ghost = (claimed!.data as { userId: string }).userId;
  assert.equal(await t.platform.deps.store.readStream(`user-${ghost}`), [], 'the claim\'s holder was never created');
  // When a user of that name is created,
  const created = await t.call('POST', '/api/users', { body: { username: 'Uma' } });
  // then it is created and holds the name;
  assert.is(created.status, 201, created.text);
  assert.is.not(created.body.id, ghost);
  assert.is((await t.call('GET', `/api/users/${created.body.id}`)).body.username, 'Uma');
  const taken = await t.call('POST', '/api/users', { body: { username: 'uma' } });
  assert.is(taken.status, 409, 'a live user\'s name stays taken');
  // and the first holder's creation, had it still been under way, can no longer be stored: no second user of the name.
  const late = handle(t.platform.deps.store, userStream(ghost), userDecider, { type: 'CreateUser', id: ghost, profile: { username: 'uma', enabled: true, requiredActions: [], attributes: {} }, passwordHash: 'x', temporaryPassword: false, at: new Date().toISOString() }, { actor: 'test', correlationId: 'late', now: new Date().toISOString() });
  await late.then(() => assert.unreachable('the holder was created after its claim was taken over'), (error) => assert.instance(error, ConflictError));
  assert.equal((await t.call('GET', '/api/users?username=uma')).body.map((u: { id: string }) => u.id), [created.body.id]);
});

users('when a non-admin creates a user or resets a password, then 403 Forbidden', async ({ t }) => {
  const frank = await givenUser(t, 'frank', { attributes: { roles: ['editor'] } });
  const create = await t.call('POST', '/api/users', { token: frank.token, body: { username: 'sneaky' } });
  assert.is(create.status, 403);
  assert.is(create.text, 'Forbidden');
  const reset = await t.call('POST', `/api/users/${frank.id}/reset-password`, { token: frank.token });
  assert.is(reset.status, 403);
});

users('when searching by username, then it matches a substring without regard to case, and hidden users are found only by admins and themselves', async ({ t }) => {
  const seeker = await givenUser(t, 'seeker');
  const hidden = await givenUser(t, 'ghost-one', { email: 'ghost@example.com', attributes: { globalVisibility: 'false' } });
  await givenUser(t, 'ghost-two', { email: 'two@example.com', attributes: { globalVisibility: 'true' } });
  const names = (res: { body: { username: string }[] }) => res.body.map((u) => u.username);
  assert.equal(names(await t.call('GET', '/api/users?username=HOST', { token: seeker.token })), ['ghost-two']);
  assert.equal(names(await t.call('GET', '/api/users?username=ghost')), ['ghost-one', 'ghost-two']);
  assert.equal(names(await t.call('GET', '/api/users?username=ghost', { token: hidden.token })), ['ghost-one', 'ghost-two']);
  const [other] = (await t.call('GET', '/api/users?username=ghost-two', { token: seeker.token })).body;
  assert.equal(Object.keys(other).sort(), ['id', 'username'], 'a non-admin sees little of others');
});

users('when a user reads another user, then 404; themselves or as admin, 200; an id that is not a UUID, 422', async ({ t }) => {
  const gina = await givenUser(t, 'gina');
  const hank = await givenUser(t, 'hank');
  assert.is((await t.call('GET', `/api/users/${hank.id}`, { token: gina.token })).status, 404);
  assert.is((await t.call('GET', `/api/users/${gina.id}`, { token: gina.token })).status, 200);
  assert.is((await t.call('GET', `/api/users/${gina.id.toUpperCase()}`, { token: gina.token })).status, 200);
  assert.is((await t.call('GET', `/api/users/${hank.id}`)).status, 200);
  const bad = await t.call('GET', '/api/users/5f0c1c9e8a55d0b9d8a0f5f2');
  assert.is(bad.status, 422);
  assert.match(bad.text, /^ERR - id /);
});

users('when a user changes their own profile, then it is saved; the username, password and their own roles cannot change', async ({ t }) => {
  const ivy = await givenUser(t, 'ivy', { attributes: { language: 'en', roles: ['editor'] } });
  const ok = await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: { firstName: 'Ivy', attributes: { language: 'fr' } } });
  assert.is(ok.status, 200, ok.text);
  assert.is(ok.body.firstName, 'Ivy');
  assert.equal(ok.body.attributes, { language: 'fr', roles: ['editor'] });
  assert.is((await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: { username: 'ivy2' } })).status, 422);
  assert.is((await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: { password: 'x12345678' } })).status, 422);
  assert.is((await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: {} })).status, 422);
  const escalate = await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: { attributes: { roles: ['admin'] } } });
  assert.is(escalate.status, 403);
  const org = await t.call('PATCH', `/api/users/${ivy.id}`, { token: ivy.token, body: { attributes: { organization: ['acme'] } } });
  assert.is(org.status, 403);
  assert.equal((await t.call('GET', `/api/users/${ivy.id}`)).body.attributes.roles, ['editor']);
});

users('when a viewer edits their own profile, then the role check refuses PATCH on users', async ({ t }) => {
  const vic = await givenUser(t, 'vic', { attributes: { roles: ['viewerBasic'] } });
  const res = await t.call('PATCH', `/api/users/${vic.id}`, { token: vic.token, body: { firstName: 'V' } });
  assert.is(res.status, 403);
  assert.is(res.text, 'Forbidden');
});

users('given a user with a token, when an admin disables them, then the token gets 401 and login fails; enabled again, both work', async ({ t }) => {
  const jay = await givenUser(t, 'jay');
  assert.is((await t.call('PATCH', `/api/users/${jay.id}`, { body: { enabled: false } })).status, 200);
  assert.is((await t.call('GET', `/api/users/${jay.id}`, { token: jay.token })).status, 401);
  const login = await t.call('POST', '/api/auth/local', { token: null, body: { username: 'jay', password: jay.password } });
  assert.is(login.status, 401);
  assert.is((await t.call('PATCH', `/api/users/${jay.id}`, { body: { enabled: true } })).status, 200);
  assert.is((await t.call('GET', `/api/users/${jay.id}`, { token: jay.token })).status, 200);
  assert.ok(await t.login('jay', jay.password));
});

users('given a user with a token, when the user is deleted, then the token gets 401, the user is gone and the username is free', async ({ t }) => {
  const kim = await givenUser(t, 'kim');
  const del = await t.call('DELETE', `/api/users/${kim.id}`);
  assert.is(del.status, 204);
  assert.is((await t.call('GET', '/api/usergroups', { token: kim.token })).status, 401);
  assert.is((await t.call('GET', `/api/users/${kim.id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/users/${kim.id}`)).status, 404);
  const again = await t.call('POST', '/api/users', { body: { username: 'Kim' } });
  assert.is(again.status, 201, again.text);
  assert.is.not(again.body.id, kim.id);
});

users('when an admin resets a password, then a new temporary password works, the old one does not, and UPDATE_PASSWORD is back', async ({ t }) => {
  const lee = await givenUser(t, 'lee');
  await t.call('PUT', '/api/auth/password', { token: lee.token, body: { currentPassword: lee.password, newPassword: 'lees-password' } });
  const res = await t.call('POST', `/api/users/${lee.id}/reset-password`);
  assert.is(res.status, 200, res.text);
  assert.ok(await t.login('lee', res.body.temporaryPassword));
  assert.is((await t.call('POST', '/api/auth/local', { token: null, body: { username: 'lee', password: 'lees-password' } })).status, 401);
  assert.equal((await t.call('GET', `/api/users/${lee.id}`)).body.requiredActions, ['UPDATE_PASSWORD']);
  assert.is((await t.call('POST', '/api/users/00000000-0000-4000-8000-000000000000/reset-password')).status, 404);
});

users('when every user route answers, then no body carries a password hash', async ({ t }) => {
  const list = await t.call('GET', '/api/users');
  assert.ok(list.body.length > 3);
  noSecrets(list.text);
});

/** What `hashPassword` stores: `scrypt$<16-byte salt, hex>$<32-byte key, hex>`. */
const SCRYPT = /^scrypt\$[0-9a-f]{32}\$[0-9a-f]{64}$/;

users('when a user is created or their password reset, then the event and the read model hold only a salted scrypt hash, never the plaintext', async ({ t }) => {
  const created = await t.call('POST', '/api/users', { body: { username: 'hashed' } });
  assert.is(created.status, 201, created.text);
  const { id, temporaryPassword } = created.body as { id: string; temporaryPassword: string };
  const storedHash = async () => (await t.platform.deps.db.selectFrom('users').select('password_hash').where('id', '=', id).executeTakeFirstOrThrow()).password_hash;

  const [event] = await t.platform.deps.store.readStream(`user-${id}`);
  assert.is(event!.type, 'UserCreated');
  const eventHash = (event!.data as { passwordHash: string }).passwordHash;
  const rowHash = await storedHash();
  for (const [where, hash] of [['event', eventHash], ['read model', rowHash]] as const) {
    assert.match(hash, SCRYPT, `the ${where} holds an scrypt hash`);
    assert.ok(await verifyPassword(temporaryPassword, hash), `the ${where}'s hash is of the temporary password`);
  }
  assert.not.ok(JSON.stringify([event!.data, event!.metadata]).includes(temporaryPassword), 'the event does not hold the plaintext');
  const { rows } = await sql<{ row: string }>`SELECT to_jsonb(u)::text AS row FROM users u WHERE id = ${id}::uuid`.execute(t.platform.deps.db);
  assert.not.ok(rows[0]!.row.includes(temporaryPassword), 'the read-model row does not hold the plaintext');

  const reset = await t.call('POST', `/api/users/${id}/reset-password`);
  assert.is(reset.status, 200, reset.text);
  const newPassword = reset.body.temporaryPassword as string;
  const resetEvent = (await t.platform.deps.store.readStream(`user-${id}`)).at(-1)!;
  assert.is(resetEvent.type, 'PasswordReset');
  const resetHash = (resetEvent.data as { passwordHash: string }).passwordHash;
  assert.match(resetHash, SCRYPT);
  assert.is(await storedHash(), resetHash);
  assert.not.ok(JSON.stringify([resetEvent.data, resetEvent.metadata]).includes(newPassword));
  // Salted per password: the same scheme, a different salt.
  assert.is.not(resetHash.split('$')[1], eventHash.split('$')[1]);
  assert.ok(await verifyPassword(newPassword, resetHash));
  assert.not.ok(await verifyPassword(temporaryPassword, resetHash));
});

users.run();
