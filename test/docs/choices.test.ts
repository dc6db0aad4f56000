/**
 * Where the contract leaves a choice open ("not shown", "such as"), the
 * platform's choice is written down, in the OpenAPI document and in docs/,
 * and the platform behaves as written.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parse } from 'yaml';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { translator } from '../translators/given.js';
import { givenUser } from '../users/given.js';
import { MAX_DEVICE_UPDATES } from '../../sandbox/result.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(repo, path), 'utf8');
const openapi = parse(read('api/openapi.yaml')) as { info: { version: string; description: string }; components: { schemas: Record<string, any> } };
const readme = read('README.md');

interface Served {
  info: { version: string; description: string };
  paths: Record<string, Record<string, any>>;
  components: { parameters: Record<string, any>; schemas: Record<string, any> };
}

/** The document the running platform serves. */
const served = async (t: TestPlatform): Promise<Served> => {
  const res = await t.call('GET', '/api/openapi.json');
  assert.is(res.status, 200, res.text);
  return res.body;
};

const choices = suite<{ t: TestPlatform }>('the platform\'s choices where the contract leaves them open');

choices.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
choices.after(async (ctx) => {
  await ctx.t.stop();
});

choices('given docs/translators.md\'s upload checks, when a translator names an apiVersion outside the pattern, then 422 as the check says', async ({ t }) => {
  const pattern = openapi.components.schemas.TranslatorUpload.properties.apiVersion.pattern as string;
  const checks = read('docs/translators.md');
  const table = checks.slice(checks.indexOf('## Upload checks'), checks.indexOf('\n## ', checks.indexOf('## Upload checks') + 1));
  const row = table.split('\n').find((line) => line.startsWith('|') && line.includes('`apiVersion`'));
  assert.ok(row, 'an upload check names apiVersion');
  assert.ok(row!.includes(`\`${pattern}\``), `the check gives the pattern ${pattern}: ${row}`);
  for (const apiVersion of ['2.0', '1']) {
    const res = await t.call('POST', '/api/translators', { body: translator({ apiVersion }) });
    assert.is(res.status, 422, `${apiVersion}: ${res.text}`);
    assert.ok(row!.includes(res.text), `the check quotes ${res.text} (${row})`);
  }
  assert.is((await t.call('POST', '/api/translators', { body: translator({ apiVersion: '1.7' }) })).status, 201);
});

choices('given the served OpenAPI document, when each list\'s default page size is read, then it is 100 or an exception that info.description and the README both name', async ({ t }) => {
  const doc = await served(t);
  const defaults = Object.entries(doc.paths).flatMap(([path, item]) => {
    const params = [...(item.parameters ?? []), ...(item.get?.parameters ?? [])].map((p: any) => (p.$ref ? doc.components.parameters[p.$ref.split('/').pop()] : p));
    const limit = item.get ? params.find((p: any) => p.name === 'limit') : undefined;
    return limit ? [{ path, size: limit.schema.default as number }] : [];
  });
  assert.ok(defaults.length >= 10, `lists with limit: ${defaults.length}`);
  for (const text of [doc.info.description, readme]) {
    assert.match(text, /100 when it is left out/);
    assert.match(text, /takes no `limit`/);
  }
  for (const { path, size } of defaults.filter((d) => d.size !== 100)) {
    assert.is(size, 1000, path);
    for (const text of [doc.info.description, readme]) assert.ok(text.includes(`GET ${path}\``), `${path} (default ${size}) is named`);
  }
});

choices('given the served OpenAPI document, then no path carries a version, the versioning scheme is written in it and in the README, and a deprecated operation answers as the scheme says', async ({ t }) => {
  const doc = await served(t);
  assert.match(doc.info.version, /^\d+\.\d+\.\d+$/);
  for (const path of Object.keys(doc.paths)) assert.not.match(path, /\/v\d+(\/|$)/, path);
  assert.match(doc.info.description, /Versions:/);
  assert.match(readme, /\*\*Versions\.\*\*/);
  for (const text of [doc.info.description, readme]) {
    assert.match(text, /semantic versioning/);
    assert.match(text, /paths carry none/);
    assert.match(text, /`Deprecation`/);
  }
  const deprecated = Object.entries(doc.paths).flatMap(([path, item]) => Object.entries(item).filter(([, op]) => op?.deprecated === true).map(([method, op]) => ({ path, method, op })));
  assert.ok(deprecated.length > 0);
  for (const { path, method, op } of deprecated) assert.type(op['x-deprecated-since'], 'string', `${method} ${path}`);
  const list = await t.call('GET', '/api/locations');
  assert.is(list.status, 200, list.text);
  assert.match(list.headers.get('deprecation') ?? '', /^@\d+$/);
});

choices('given the served OpenAPI document, then a translator upload\'s code says what additionalDeviceUpdates holds', async ({ t }) => {
  const code = ((await served(t)).components.schemas.TranslatorUpload.properties.code.description as string).replace(/\s+/g, ' ');
  assert.match(code, /additionalDeviceUpdates/);
  assert.match(code, /\{identifier, result\}/);
  assert.ok(code.includes(`at most ${MAX_DEVICE_UPDATES.toLocaleString('en')}`), `names the cap of ${MAX_DEVICE_UPDATES}`);
  assert.match(code, /`secret` of a device created by the same user as the gateway/);
});

choices('given a user who may only peek at a device, when it reads the device and the list, then it sees neither, as the Scope description says', async ({ t }) => {
  const scope = ((await served(t)).components.schemas.Scope.description as string).replace(/\n  +/g, ' ');
  for (const name of ['admin', 'write', 'read', 'peek']) assert.match(scope, new RegExp(`- \`${name}\`: `), `${name} has its powers`);
  assert.match(scope, /`peek`: [^-]*404/);
  const peeker = await givenUser(t, 'peeker', { attributes: { roles: ['viewerFull'] } });
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'peeked at' } });
  const right = await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: device.body._id, subjectType: 'user', subjectId: peeker.id, scope: ['peek'] } });
  assert.ok(right.status < 300, right.text);
  assert.is((await t.call('GET', `/api/iotnodes/${device.body._id}`, { token: peeker.token })).status, 404);
  const list = await t.call('GET', '/api/iotnodes', { token: peeker.token });
  assert.is(list.status, 200, list.text);
  assert.not.ok(list.body.some((d: { _id: string }) => d._id === device.body._id));
});

choices.run();
