import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import jwt from 'jsonwebtoken';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from './given.js';

const tokens = suite<{ t: TestPlatform; secret: string; userId: string }>('tokens');

tokens.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.secret = ctx.t.platform.deps.jwtSecret;
  ctx.userId = (await givenUser(ctx.t, 'holder')).id;
});
tokens.after(async (ctx) => {
  await ctx.t.stop();
});

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const status = async (t: TestPlatform, token: string | null, headers: Record<string, string> = {}) =>
  (await t.call('GET', '/api/usergroups', { token, headers })).status;

tokens('when a token comes from login, then it works and expires after TOKEN_TTL_SECONDS (3600 by default)', async ({ t }) => {
  assert.is(await status(t, t.adminToken), 200);
  const claims = jwt.decode(t.adminToken) as { iat: number; exp: number };
  assert.is(claims.exp - claims.iat, 3600);
  assert.is(t.platform.deps.config.tokenTtlSeconds, 3600);
});

tokens('when the token is missing or not a JWT, then 401', async ({ t }) => {
  assert.is(await status(t, null), 401);
  assert.is(await status(t, 'not-a-token'), 401);
  assert.is(await status(t, null, { authorization: `Basic ${Buffer.from('admin:x').toString('base64')}` }), 401);
});

tokens('when the token has expired, then 401', async ({ t, secret, userId }) => {
  const past = Math.floor(Date.now() / 1000) - 7200;
  const expired = jwt.sign({ iat: past, exp: past + 60 }, secret, { algorithm: 'HS256', subject: userId, issuer: 'device-platform' });
  assert.is(await status(t, expired), 401);
  const fresh = jwt.sign({}, secret, { algorithm: 'HS256', subject: userId, issuer: 'device-platform', expiresIn: 60 });
  assert.is(await status(t, fresh), 200, 'the same claims, unexpired, pass');
});

tokens('when the token is unsigned (alg none), then 401', async ({ t, userId }) => {
  const now = Math.floor(Date.now() / 1000);
  const unsigned = `${b64({ alg: 'none', typ: 'JWT' })}.${b64({ sub: userId, iss: 'device-platform', iat: now, exp: now + 600 })}.`;
  assert.is(await status(t, unsigned), 401);
});

tokens('when the signature is wrong or made with another algorithm, then 401', async ({ t, secret, userId }) => {
  const other = jwt.sign({}, 'another-secret-that-is-long-enough-0123456789', { algorithm: 'HS256', subject: userId, issuer: 'device-platform', expiresIn: 60 });
  assert.is(await status(t, other), 401);
  const [header, payload, signature] = t.adminToken.split('.');
  const tampered = `${header}.${b64({ ...(jwt.decode(t.adminToken) as object), sub: userId })}.${signature}`;
  assert.is.not(payload, tampered.split('.')[1]);
  assert.is(await status(t, tampered), 401);
  const hs512 = jwt.sign({}, secret, { algorithm: 'HS512', subject: userId, issuer: 'device-platform', expiresIn: 60 });
  assert.is(await status(t, hs512), 401);
});

tokens('when a valid token names a user who does not exist or is deleted, then 401', async ({ t, secret }) => {
  const ghost = jwt.sign({}, secret, { algorithm: 'HS256', subject: '00000000-0000-4000-8000-000000000000', issuer: 'device-platform', expiresIn: 60 });
  assert.is(await status(t, ghost), 401);
  const gone = await givenUser(t, 'soon-gone');
  assert.is(await status(t, gone.token), 200);
  await t.call('DELETE', `/api/users/${gone.id}`);
  assert.is(await status(t, gone.token), 401);
});

tokens('when the user of a valid token is disabled, then 401 from the very next request', async ({ t }) => {
  const off = await givenUser(t, 'switched-off');
  assert.is(await status(t, off.token), 200, 'a request before the change');
  await t.call('PATCH', `/api/users/${off.id}`, { body: { enabled: false } });
  assert.is(await status(t, off.token), 401);
  await t.call('PATCH', `/api/users/${off.id}`, { body: { enabled: true } });
  assert.is(await status(t, off.token), 200, 'enabled again');
});

tokens('when a user gains or loses a role, then the very next request is checked against the new roles', async ({ t }) => {
  const user = await givenUser(t, 'promoted');
  const create = () => t.call('POST', '/api/usergroups', { token: user.token, body: { name: 'made by promoted' } });
  assert.is((await create()).status, 403);
  await t.call('PATCH', `/api/users/${user.id}`, { body: { attributes: { roles: ['admin'] } } });
  assert.is((await create()).status, 201);
  await t.call('PATCH', `/api/users/${user.id}`, { body: { attributes: { roles: ['viewerBasic'] } } });
  assert.is((await create()).status, 403);
});

tokens('given a user with tokens, when they change their password, then every token issued before is refused, one issued in the very second of the change too, and the token the answer carries works', async ({ t, secret }) => {
  const user = await givenUser(t, 'changer');
  const other = await t.login('changer', user.password);
  assert.is(await status(t, user.token), 200, 'a request before the change');
  const res = await t.call('PUT', '/api/auth/password', { token: user.token, body: { currentPassword: user.password, newPassword: 'changers-own-secret' } });
  assert.is(res.status, 200, res.text);
  assert.is(await status(t, user.token), 401, 'the token that made the change');
  assert.is(await status(t, other), 401, 'another token of the user');
  const fresh = res.body.token as string;
  assert.is(await status(t, fresh), 200, 'the token the answer carries');
  // Tokens are told apart by version, not by time: a token of the old version stamped in the very second of the
  // change (iat has a resolution of one second) is refused; one of the current version is accepted.
  const { iat, exp } = jwt.decode(fresh) as { iat: number; exp: number };
  const sameSecond = (ver: number | undefined) => jwt.sign({ iat, exp, ...(ver === undefined ? {} : { ver }) }, secret, { algorithm: 'HS256', subject: user.id, issuer: 'device-platform' });
  assert.is(await status(t, sameSecond(0)), 401, 'the old version, issued in the second of the change');
  assert.is(await status(t, sameSecond(undefined)), 401, 'a token without a version counts as the first');
  assert.is(await status(t, sameSecond(2)), 401, 'a version the user has not reached');
  assert.is(await status(t, sameSecond(1)), 200, 'the current version');
  assert.is(await status(t, await t.login('changer', 'changers-own-secret')), 200, 'a login with the new password');
});

tokens('given a user with a token, when an admin resets their password, then the token is refused and a login with the temporary password works', async ({ t }) => {
  const user = await givenUser(t, 'reset-by-admin');
  assert.is(await status(t, user.token), 200);
  const reset = await t.call('POST', `/api/users/${user.id}/reset-password`);
  assert.is(reset.status, 200, reset.text);
  assert.is(await status(t, user.token), 401);
  assert.is(await status(t, await t.login('reset-by-admin', reset.body.temporaryPassword)), 200);
});

tokens('given a member with a token, when the admin of their organization unit resets their password, then the token is refused', async ({ t }) => {
  const unit = await t.call('POST', '/api/organizations', { body: { name: 'Token Unit' } });
  assert.is(unit.status, 201, unit.text);
  const created = await t.call('POST', `/api/organizations/${unit.body._id}/members`, { body: { username: 'unit-member' } });
  assert.is(created.status, 201, created.text);
  const token = await t.login('unit-member', created.body.temporaryPassword);
  assert.is(await status(t, token), 200);
  const reset = await t.call('POST', `/api/organizations/${unit.body._id}/members/${created.body.id}/reset-password`);
  assert.is(reset.status, 200, reset.text);
  assert.is(await status(t, token), 401);
  assert.is(await status(t, await t.login('unit-member', reset.body.temporaryPassword)), 200);
});

tokens.run();
