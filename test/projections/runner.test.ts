import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { exerciseEveryCapability } from '../support/scenario.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { allProjections } from '../../projections/index.js';
import { rebuild } from '../../projections/rebuild.js';

const projections = suite<{ t: TestPlatform }>('projection runner');

projections.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  await exerciseEveryCapability(ctx.t);
});
projections.after(async (ctx) => {
  await ctx.t.stop();
});

projections('given projected events, when every event is applied a second time, then no read model changes', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const before = await snapshotReadModels(db);
  assert.ok(Object.values(before).some((rows) => rows.length > 0), 'the scenario wrote read-model rows');
  // A runner named differently starts from the beginning, over read models that already hold every event.
  const replay = new ProjectionRunner(store, db, allProjections(), pino({ level: 'silent' }), 'replay-test');
  await replay.catchUp();
  assert.equal(await snapshotReadModels(db), before);
});

projections('given projected events, when the read models are rebuilt, then they equal the live ones', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const before = await snapshotReadModels(db);
  await t.platform.deps.projections.stop();
  try {
    await rebuild(store, db, pino({ level: 'silent' }));
    assert.equal(await snapshotReadModels(db), before);
  } finally {
    await t.platform.deps.projections.start();
  }
});

projections('given the projections are stopped, when a REST write is made, then it answers 503 and the change appears once they run', async ({ t }) => {
  await t.platform.deps.projections.stop();
  const original = t.platform.deps.config.projectionWaitMs;
  t.platform.deps.config.projectionWaitMs = 200;
  let created;
  try {
    created = await t.call('POST', '/api/users', { body: { username: 'late-reader' } });
  } finally {
    t.platform.deps.config.projectionWaitMs = original;
    // Restarting catches up before it resolves.
    await t.platform.deps.projections.start();
  }
  assert.is(created.status, 503);
  assert.match(created.text, /stored/);
  const found = await t.call('GET', '/api/users?username=late-reader');
  assert.is(found.status, 200);
  assert.ok(JSON.stringify(found.body).includes('late-reader'));
});

projections.run();
