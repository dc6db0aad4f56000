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

const repo = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(repo, path), 'utf8');
const openapi = parse(read('api/openapi.yaml')) as { info: { version: string; description: string }; components: { schemas: Record<string, any> } };

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

choices.run();
