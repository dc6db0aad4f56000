import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';

const errors = suite<{ t: TestPlatform }>('unexpected errors');

errors.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
errors.after(async (ctx) => {
  await ctx.t.stop();
});

errors('when a request fails unexpectedly, then 500 carries an error id, no stack, and the log has the same id', async ({ t }) => {
  // Break the users read model under the running platform: login's query now fails.
  await sql`ALTER TABLE users RENAME TO users_gone`.execute(t.platform.deps.db);
  try {
    const res = await t.call('POST', '/api/auth/local', { token: null, body: ADMIN });
    assert.is(res.status, 500);
    const id = res.headers.get('x-error-id');
    assert.ok(id, 'X-Error-Id header');
    assert.ok(res.text.includes(id!), res.text);
    assert.not.match(res.text, /at .*\.ts|users_gone|relation/);
    const logged = t.logs.find((line) => line.errorId === id);
    assert.ok(logged, 'a log line carries the error id');
    assert.match(JSON.stringify(logged), /users/);
  } finally {
    await sql`ALTER TABLE users_gone RENAME TO users`.execute(t.platform.deps.db);
  }
});

errors('when a token is missing or malformed, then 401', async ({ t }) => {
  assert.is((await t.call('GET', '/api/users', { token: null })).status, 401);
  assert.is((await t.call('GET', '/api/users', { token: 'not-a-jwt' })).status, 401);
});

errors('when a body is larger than the cap, then 413 and no 500', async ({ t }) => {
  const res = await t.call('POST', '/api/auth/local', { token: null, raw: JSON.stringify({ username: 'x'.repeat(2 * 1024 * 1024), password: 'y' }) });
  assert.is(res.status, 413);
});

errors.run();
