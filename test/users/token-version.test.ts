import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { usersProjection } from '../../projections/users.js';
import { rebuild } from '../../projections/rebuild.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { givenUser } from './given.js';

/**
 * The users read model keeps each user's token version: how many times their
 * password was changed or reset, counted from the events, never from a clock.
 * The same event applied twice changes nothing, and a rebuild from the log
 * gives the very rows the live projection wrote.
 */
const versions = suite<{ t: TestPlatform }>('users read model: token versions');

versions.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
versions.after(async (ctx) => {
  await ctx.t.stop();
});

const versionOf = async (t: TestPlatform, id: string) =>
  (await t.platform.deps.db.selectFrom('users').select('token_version').where('id', '=', id).executeTakeFirstOrThrow()).token_version;

versions('given users whose passwords were changed and reset, when their events are applied again and the read model is rebuilt, then each version counts the changes once, and the rebuild equals the live rows', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const untouched = await givenUser(t, 'version-untouched');
  const changed = await givenUser(t, 'version-changed');
  const res = await t.call('PUT', '/api/auth/password', { token: changed.token, body: { currentPassword: changed.password, newPassword: 'version-changed-1' } });
  assert.is(res.status, 200, res.text);
  assert.is((await t.call('POST', `/api/users/${changed.id}/reset-password`)).status, 200);
  assert.is(await versionOf(t, untouched.id), 0);
  assert.is(await versionOf(t, changed.id), 2, 'a change and a reset');

  const live = (await snapshotReadModels(db)).users;
  const events = [...(await store.readStream(`user-${changed.id}`)), ...(await store.readStream(`user-${untouched.id}`))];
  await db.transaction().execute((tx) => usersProjection.apply(tx, events));
  assert.equal((await snapshotReadModels(db)).users, live, 'applying the same events again changes nothing');

  await rebuild(store, db, pino({ level: 'silent' }), { names: ['users'] });
  assert.equal((await snapshotReadModels(db)).users, live, 'the rebuilt rows are the live ones');
  assert.is(await versionOf(t, changed.id), 2);
});

versions.run();
