/**
 * The read models of locations, organization units, apps, app filters and
 * the logs they imply: applying an event twice changes nothing, and a
 * rebuild from the events reproduces them exactly.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { sql, type Kysely, type Transaction } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { allProjections } from '../../projections/index.js';
import type { Database } from '../../projections/database.js';
import type { RecordedEvent } from '../../domain/shared/events.js';

const TABLES = ['locations', 'organizations', 'organization_tree', 'apps', 'usergroups', 'usergroup_members', 'users', 'access_rights', 'device_logs'];
const OURS = /^(location|organization|app|usergroup|user)-/;

async function snapshot(db: Kysely<Database> | Transaction<Database>): Promise<Record<string, string[]>> {
  const out: Record<string, string[]> = {};
  for (const table of TABLES) {
    const { rows } = await sql<{ row: unknown }>`SELECT to_jsonb(x) AS row FROM ${sql.table(table)} x`.execute(db);
    out[table] = rows.map((r) => JSON.stringify(r.row)).sort();
  }
  return out;
}

const replay = suite<{ t: TestPlatform }>('locations, organizations and apps read models on replay');

replay.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await t.call(method, path, { body });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  // Every event type of these streams, deletions included.
  const device = await ok('POST', '/api/iotnodes', { name: 'Replayed' });
  const layer = { name: 'Plan', left: 10, top: 20, width: 60, height: 70, items: [{ deviceId: device._id, top: 5 }] };
  const kept = await ok('POST', '/api/locations', { name: 'Kept', lat: 1, lng: 2, defaultLayer: layer });
  await ok('PUT', `/api/locations/${kept._id}`, { name: 'Kept två', lat: 1, lng: 2, defaultLayer: layer, layers: [{ name: 'Extra' }] });
  const dropped = await ok('POST', '/api/locations', { name: 'Dropped', lat: 1, lng: 2, defaultLayer: {} });
  await ok('DELETE', `/api/locations/${dropped._id}`);

  const acme = await ok('POST', '/api/organizations', { name: 'Acme', description: 'Top' });
  const sales = await ok('POST', '/api/organizations', { name: 'Sales', parent: acme._id });
  const nordic = await ok('POST', '/api/organizations', { name: 'Nordic', parent: sales._id });
  const globex = await ok('POST', '/api/organizations', { name: 'Globex' });
  await ok('PUT', `/api/organizations/${sales._id}`, { name: 'Sales', parent: globex._id });
  await ok('PUT', `/api/organizations/${acme._id}`, { name: 'Acme', description: 'Still top' });
  await ok('POST', '/api/access-rights', { resourceType: 'device', resourceId: device._id, subjectType: 'orgUnit', subjectId: 'Globex', scope: ['read'] });
  await ok('POST', '/api/access-rights', { resourceType: 'device', resourceId: device._id, subjectType: 'orgUnit', subjectId: 'Acme', scope: ['read'] });
  const mia = await ok('POST', `/api/organizations/${nordic._id}/members`, { username: 'mia' });
  await ok('POST', `/api/organizations/${nordic._id}/members/${mia.id}/reset-password`);
  await ok('PUT', `/api/organizations/${globex._id}/members/${mia.id}`);
  await ok('DELETE', `/api/organizations/${globex._id}/members/${mia.id}`);
  await ok('DELETE', `/api/organizations/${acme._id}`);

  const alpha = await ok('POST', '/api/apps', { name: 'Alpha' });
  const bravo = await ok('POST', '/api/apps', { name: 'Bravo', description: 'B' });
  await ok('PUT', `/api/apps/${alpha._id}`, { name: 'Alpha 2' });
  await ok('POST', `/api/apps/${alpha._id}/secret`);
  const team = await ok('POST', '/api/usergroups', { name: 'Team' });
  const ben = await givenUser(t, 'ben');
  await ok('PATCH', `/api/usergroups/${team._id}`, { name: 'Team 2', owner: ben.id });
  await ok('POST', '/api/access-rights', { resourceType: 'usergroup', resourceId: team._id, subjectType: 'singleton', subjectId: ben.id, scope: ['read'] });
  await ok('POST', `/api/usergroups/${team._id}/members`, { userId: ben.id });
  await ok('POST', `/api/usergroups/${team._id}/members`, { userId: mia.id });
  await ok('DELETE', `/api/usergroups/${team._id}/members/${ben.id}`);
  await ok('PUT', `/api/usergroups/${team._id}/app-filter`, { appIds: [alpha._id, bravo._id] });
  await ok('DELETE', `/api/usergroups/${team._id}/app-filter/${alpha._id}`);
  await ok('POST', `/api/usergroups/${team._id}/app-filter`, { appId: alpha._id });
  const other = await ok('POST', '/api/usergroups', { name: 'Other' });
  await ok('POST', `/api/usergroups/${other._id}/app-filter`, { appId: bravo._id });
  await ok('DELETE', `/api/usergroups/${other._id}/app-filter`);
  await ok('DELETE', `/api/apps/${bravo._id}`);
  await ok('DELETE', `/api/users/${ben.id}`);
});
replay.after(async (ctx) => {
  await ctx.t.stop();
});

replay('given every kind of event, when all are applied a second time, then no row changes', async ({ t }) => {
  const before = await snapshot(t.platform.deps.db);
  assert.equal(
    [before.locations!.length, before.organizations!.length, before.organization_tree!.length, before.apps!.length],
    [1, 3, 6, 1],
    'one location, Sales > Nordic below Globex (1 + 2 + 3 tree rows), one app',
  );
  assert.ok(before.device_logs!.length >= 15, 'the usergroup and organization events are logged');
  assert.ok(before.usergroups!.some((r) => r.includes('"app_filter":["')), 'a filter is stored');
  const { db, store } = t.platform.deps;
  const again = new ProjectionRunner(store, db, allProjections(), pino({ level: 'silent' }), 'models-replay');
  await again.catchUp();
  assert.equal(await snapshot(db), before);
});

replay('given every kind of event, when each is applied twice in a row from empty read models, then the second application changes nothing and the end equals the live models', async ({ t }) => {
  const { db, store } = t.platform.deps;
  const live = await snapshot(db);
  const events: RecordedEvent[] = [];
  for (let after = null; ; ) {
    const batch = await store.readAll({ after, limit: 1000 });
    if (batch.length === 0) break;
    events.push(...batch);
    after = batch[batch.length - 1]!.position;
  }
  const projections = allProjections();
  const rollback = new Error('rollback');
  await t.platform.deps.projections.stop();
  try {
    await db
      .transaction()
      .execute(async (tx) => {
        await sql`TRUNCATE ${sql.join(projections.flatMap((p) => p.tables).map((name) => sql.table(name)))} CASCADE`.execute(tx);
        for (const event of events) {
          for (const p of projections) await p.apply(tx, [event]);
          if (!OURS.test(event.streamId)) continue;
          const once = await snapshot(tx);
          for (const p of projections) await p.apply(tx, [event]);
          assert.equal(await snapshot(tx), once, `${event.type} on ${event.streamId} applied again`);
        }
        assert.equal(await snapshot(tx), live);
        throw rollback;
      })
      .catch((error) => {
        if (error !== rollback) throw error;
      });
  } finally {
    await t.platform.deps.projections.start();
  }
});

replay('given every kind of event, when the read models are emptied and rebuilt in one batch, then they equal the live ones', async ({ t }) => {
  const before = await snapshot(t.platform.deps.db);
  const { db, store } = t.platform.deps;
  await t.platform.deps.projections.stop();
  try {
    const rebuilt = new ProjectionRunner(store, db, allProjections(), pino({ level: 'silent' }), 'models-rebuild');
    await rebuilt.reset();
    await rebuilt.catchUp();
    assert.equal(await snapshot(db), before);
  } finally {
    await t.platform.deps.projections.start();
  }
});

replay.run();
