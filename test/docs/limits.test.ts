/**
 * Limits the platform adds to the contract are written in docs/security.md's
 * limits table, and the platform answers at them as the table says.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const security = readFileSync(join(repo, 'docs/security.md'), 'utf8');
const restLimits = security.slice(security.indexOf('### REST'), security.indexOf('### MQTT'));

/** The cells of the REST limits row whose first cell starts with `what`. */
const row = (what: string) =>
  restLimits
    .split('\n')
    .find((line) => line.startsWith(`| ${what}`))
    ?.split(' | ')
    .map((cell) => cell.replace(/^\| | \|$/g, ''));

const limits = suite<{ t: TestPlatform }>('docs/security.md: the limits the platform adds');

limits.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
limits.after(async (ctx) => {
  await ctx.t.stop();
});

limits('given the limits table\'s row for a credentials set\'s password, when a set is created one character below it, then 422 as the row says; at it, 201', async ({ t }) => {
  const cells = row('credentials set `password`');
  assert.ok(cells, 'docs/security.md has a row for a credentials set\'s password');
  const [, limit, past] = cells!;
  assert.match(limit!, /platform addition/);
  const min = Number(/at least (\d+) characters/.exec(limit!)?.[1]);
  assert.ok(min > 0, limit);
  const short = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'short-password', password: 'p'.repeat(min - 1) } });
  assert.is(short.status, 422, short.text);
  assert.ok(past!.includes(short.text), `${past} quotes ${short.text}`);
  const ok = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'long-enough', password: 'p'.repeat(min) } });
  assert.is(ok.status, 201, ok.text);
});

limits.run();
