/**
 * A run's conditions are evaluated on their devices as of the event that
 * triggered it, not as the read models show them when the rules reactor gets
 * to it: the decision is the same however far behind the reactor is, and a
 * trigger handled again (after a crash before the checkpoint) decides what
 * it decided the first time, also when that was not to run.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { edge, givenDevice, givenRule, logAction, onDevice, when, checkpointBefore } from './given.js';
import { ChangeTracker } from '../../reactors/channels/changes.js';

const asOf = suite('rules v2: conditions as of the trigger');

/** Whether the subscriber's stored checkpoint is at or past the event. */
async function handled(db: Kysely<any>, subscriber: string, eventId: string): Promise<boolean> {
  const { rows } = await sql<{ done: boolean }>`
    SELECT (c.commit_position, c.prepare_position) >= (e.transaction_id::text::numeric, e.global_position) AS done
    FROM es.checkpoints c, es.events e WHERE c.name = ${subscriber} AND e.event_id = ${eventId}::uuid`.execute(db);
  return rows[0]?.done === true;
}

const runsOf = async (t: TestPlatform, ruleId: string) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'RuleRunStarted' AND data->>'ruleId' = ${ruleId}`.execute(t.platform.deps.db)).rows[0]!.n;

const lastEventOf = async (t: TestPlatform, deviceId: string) => (await t.platform.deps.store.readStream(`device-${deviceId}`)).at(-1)!;

asOf('given a change of the boiler while the fan was off, and the fan switched on after it, when the rules reactor handles both again (a crash before its checkpoint), then the condition "fan running" sees the fan as it was at the change: no run, as the first time', async () => {
  let t = await startTestPlatform();
  try {
    const boiler = await givenDevice(t, 'boiler', { temperature: 20 });
    const fan = await givenDevice(t, 'fan', { running: false });
    const rule = await givenRule(
      t,
      'cooling check',
      [onDevice('report', boiler._id, ['temperature']), when('cooling', fan._id, 'running', 'eq', true), logAction('note', 'hot while cooling')],
      [edge('report', 'cooling'), edge('cooling', 'note')],
    );
    // Given: the boiler changes while the fan is off (its condition does not hold: no run), then the fan goes on.
    assert.is((await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 60 } })).status, 200);
    const change = await lastEventOf(t, boiler._id);
    await eventually(() => handled(t.platform.deps.db, 'rules', change.id), 10_000, 'the change to be handled');
    assert.is(await runsOf(t, rule._id), 0, 'the fan was off: no run');
    assert.is((await t.call('PUT', `/api/iotnodes/${fan._id}`, { body: { running: true } })).status, 200);

    // The state a crash before the reactor's checkpoint leaves: the checkpoint before the boiler's change.
    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    try {
      await checkpointBefore(db, 'rules', `device-${boiler._id}`, 'DeviceUpdated');
      assert.is(await handled(db, 'rules', change.id), false);
    } finally {
      await db.destroy();
    }

    // When the platform starts again and the reactor handles the change again, the fan on in the read models,
    t = await startTestPlatform({ databaseUrl: url });
    await eventually(() => handled(t.platform.deps.db, 'rules', change.id), 10_000, 'the change to be handled again');

    // then the condition saw the fan as it was at the change: still no run.
    assert.is(await runsOf(t, rule._id), 0, 'no run decided on the fan as it is now');
  } finally {
    await t.stop();
  }
});

asOf('given a device changed after a place in the log, when the change tracker reads it as of that place, then it folds its events up to there: the read model\'s row is not used when it is past it', async () => {
  const t = await startTestPlatform();
  try {
    const fan = await givenDevice(t, 'fan', { running: false, speed: 1 });
    assert.is((await t.call('PUT', `/api/iotnodes/${fan._id}`, { body: { speed: 2 } })).status, 200);
    const then = await lastEventOf(t, fan._id);
    assert.is((await t.call('PUT', `/api/iotnodes/${fan._id}`, { body: { running: true, speed: 3 } })).status, 200);
    const now = await lastEventOf(t, fan._id);
    await t.platform.deps.projections.waitFor(now.position, 10_000);
    const tracker = new ChangeTracker(t.platform.deps.store, t.platform.deps.db);
    const before = await tracker.readAsOf(fan._id, then.position);
    assert.is(before?.running, false);
    assert.is(before?.speed, 2);
    const after = await tracker.readAsOf(fan._id, now.position);
    assert.is(after?.running, true);
    assert.is(after?.speed, 3);
  } finally {
    await t.stop();
  }
});

asOf.run();
