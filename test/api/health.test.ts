import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

const health = suite<{ t: TestPlatform }>('health');

health.before(async (ctx) => {
  ctx.t = await startTestPlatform({ logLevel: 'silent' });
});
health.after(async (ctx) => {
  await ctx.t.stop();
});

health('given a running platform, when health is asked without a token, then 200 with every part up', async ({ t }) => {
  const res = await t.call('GET', '/api/health', { token: null });
  assert.is(res.status, 200);
  assert.equal(res.body, { status: 'ok', database: true, eventStore: { kind: 'postgres', up: true }, projections: true, parkedEvents: 0 });
});

health('given the projections have stopped, when health is asked, then 503 starting', async ({ t }) => {
  await t.platform.deps.projections.stop();
  const res = await t.call('GET', '/api/health', { token: null });
  assert.is(res.status, 503);
  assert.is(res.body.status, 'starting');
  assert.is(res.body.projections, false);
  assert.is(res.body.database, true);
});

health.run();
