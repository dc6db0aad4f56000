import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';
import { givenUser } from './given.js';

const logins = suite<{ t: TestPlatform }>('failed logins');

logins.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
logins.after(async (ctx) => {
  await ctx.t.stop();
});

const login = (t: TestPlatform, username: string, password: string) => t.call('POST', '/api/auth/local', { token: null, body: { username, password } });

logins('given 10 failed logins for one username from one address, when it logs in again from there, even with its password, then 429 with Retry-After; from another address it logs in, as do other names', async ({ t }) => {
  const mia = await givenUser(t, 'mia');
  for (let i = 0; i < 10; i++) assert.is((await login(t, 'MIA', `guess-${i}`)).status, 401);
  const held = await login(t, 'mia', mia.password);
  assert.is(held.status, 429, held.text);
  assert.match(held.text, /^ERR - too many failed logins for this username from this address: at most 10 a minute; try again in \d+ s$/);
  assert.ok(Number(held.headers.get('retry-after')) >= 1);
  assert.is((await login(t, ADMIN.username, ADMIN.password)).status, 200);
  // The server listens on every address: over IPv6 loopback the same user is another client address.
  const elsewhere = await fetch(`http://[::1]:${t.platform.httpPort}/api/auth/local`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'mia', password: mia.password }) });
  assert.is(elsewhere.status, 200, await elsewhere.text());
});

logins('given 30 failed logins from one address, whatever the names, when anyone logs in from it, then 429 before the password is checked', async ({ t }) => {
  // The bucket refills at 30 a minute while the guesses are hashed, so a few more than 30 may pass.
  let failed = 0;
  let res = await login(t, 'nobody-0', 'guess');
  while (res.status === 401 && failed < 60) res = await login(t, `nobody-${++failed}`, 'guess');
  assert.is(res.status, 429, res.text);
  assert.ok(failed >= 20 && failed < 45, `${failed} failures before the limit`);
  assert.match(res.text, /^ERR - too many failed logins from this address/);
  assert.is((await login(t, ADMIN.username, ADMIN.password)).status, 429);
});

logins.run();
