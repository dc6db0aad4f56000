import { Script } from 'node:vm';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, ADMIN, type TestPlatform } from '../support/platform.js';

const api = suite<{ t: TestPlatform }>('REST skeleton');

api.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
api.after(async (ctx) => {
  await ctx.t.stop();
});

api('when the platform is up, then GET /api/health answers 200', async ({ t }) => {
  const res = await t.call('GET', '/api/health', { token: null });
  assert.is(res.status, 200);
  assert.is(res.body.status, 'ok');
});

api('when a path is not declared, then 404', async ({ t }) => {
  const res = await t.call('GET', '/api/no-such-thing');
  assert.is(res.status, 404);
});

api('given no token, when a request names no operation of the document, then 404 or 405 with Allow, before authentication; a declared one is 401', async ({ t }) => {
  assert.is((await t.call('GET', '/api/no-such-thing', { token: null })).status, 404);
  const wrongMethod = await t.call('PATCH', '/api/iotnodes', { token: null });
  assert.is(wrongMethod.status, 405);
  assert.is(wrongMethod.headers.get('allow'), 'GET, POST');
  assert.is((await t.call('GET', '/api/iotnodes', { token: null })).status, 401);
});

api('when logging in with the right password, then a token comes back', async ({ t }) => {
  const res = await t.call('POST', '/api/auth/local', { token: null, body: ADMIN });
  assert.is(res.status, 200);
  assert.type(res.body.token, 'string');
});

api('when logging in with a wrong password, then 401', async ({ t }) => {
  const res = await t.call('POST', '/api/auth/local', { token: null, body: { ...ADMIN, password: 'wrong' } });
  assert.is(res.status, 401);
});

api('when the login body misses a field, then 422 names it', async ({ t }) => {
  const res = await t.call('POST', '/api/auth/local', { token: null, body: { username: 'x' } });
  assert.is(res.status, 422);
  assert.ok(res.text.startsWith('ERR - '), res.text);
  assert.match(res.text, /password/);
});

api('when the body is malformed JSON, then 422 and no 500', async ({ t }) => {
  const res = await t.call('POST', '/api/auth/local', { token: null, raw: '{"username": ' });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - /);
});

api('when the OpenAPI document is asked for, then it is served as JSON', async ({ t }) => {
  const res = await t.call('GET', '/api/openapi.json', { token: null });
  assert.is(res.status, 200);
  assert.ok(res.body.paths['/api/auth/local']);
});

api('when the interactive docs are asked for without a token, then 200 HTML with Swagger UI', async ({ t }) => {
  const res = await t.call('GET', '/api/docs/', { token: null });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(res.text, /swagger-ui/);
  // The page's script is valid JavaScript and loads the document /api/openapi.json serves.
  const init = await t.call('GET', '/api/docs/swagger-ui-init.js', { token: null });
  assert.is(init.status, 200);
  new Script(init.text);
  assert.match(init.text, /"swaggerUrl": "\/api\/openapi.json"/);
  assert.match(res.headers.get('content-security-policy') ?? '', /frame-ancestors 'none'/);
  // The rest of the Swagger UI package is not served.
  for (const path of ['/api/docs/index.html', '/api/docs/swagger-ui-bundle.js.map', '/api/docs/README.md', '/api/docs/oauth2-redirect.html']) {
    assert.is((await t.call('GET', path, { token: null })).status, 404, path);
  }
});

api('when the OpenAPI document is read, then every path starts with /api/', async ({ t }) => {
  const paths = Object.keys((await t.call('GET', '/api/openapi.json', { token: null })).body.paths);
  assert.ok(paths.length > 10, `the document declares the platform's paths (${paths.length})`);
  assert.equal(paths.filter((p) => !p.startsWith('/api/')), []);
});

api('when an anonymous caller sends a bad body, then 401 comes before any verdict on the body', async ({ t }) => {
  const res = await t.call('POST', '/api/usergroups', { token: null, body: { name: 1 } });
  assert.is(res.status, 401);
});

api.run();
