/**
 * Action outcomes are recorded per batch of the rules reactor, in one append
 * after the batch's actions: a crash between the actions and that append
 * leaves the runs started, their effects done, and no outcome stored. Handled
 * again, the batch records every outcome once and does no effect twice.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { deviceNow, edge, givenDevice, givenRule, logAction, logged, onDevice, setField, when, checkpointBefore } from './given.js';

const outcomes = suite('rules v2: action outcomes across a crash');

interface Stored {
  stream_id: string;
  type: string;
  event_id: string;
  node: string | null;
  actor: string;
}

/** Stored events matching a condition on `es.events`, in global order. */
const eventsOf = async (t: TestPlatform, where: string, params: unknown[]): Promise<Stored[]> =>
  (
    await t.platform.deps.db.executeQuery<Stored>(
      CompiledQuery.raw(`SELECT stream_id, type, event_id::text, data->>'nodeId' AS node, metadata->>'actor' AS actor FROM es.events WHERE ${where} ORDER BY transaction_id, global_position`, params),
    )
  ).rows;

outcomes('given runs whose actions were done but whose outcomes a crash kept from being stored, when the batch is handled again, then each outcome is stored once and no effect is done twice', async () => {
  let t = await startTestPlatform();
  try {
    const boiler = await givenDevice(t, 'boiler', { temperature: 20 });
    const fan = await givenDevice(t, 'fan', { running: false });
    const cool = await givenRule(
      t,
      'cool',
      [onDevice('report', boiler._id, ['temperature']), when('hot', boiler._id, 'temperature', 'gte', 50), setField('on', fan._id, 'running', true), logAction('note', 'fan on')],
      [edge('report', 'hot'), edge('hot', 'on'), edge('hot', 'note')],
    );
    const watch = await givenRule(t, 'watch', [onDevice('report', boiler._id, ['temperature']), logAction('seen', 'boiler changed')], [edge('report', 'seen')]);

    // Given: one change of the boiler starts a run of each rule, both carried out.
    const trigger = await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 60 } });
    assert.is(trigger.status, 200, trigger.text);
    await logged(t, cool._id, /^fan on$/);
    await logged(t, watch._id, /^boiler changed$/);
    const runs = (await eventsOf(t, `type = 'RuleRunStarted'`, [])).map((r) => r.stream_id);
    assert.is(runs.length, 2);
    const outcomesBefore = await eventsOf(t, `stream_id = ANY($1::text[]) AND type LIKE 'RuleAction%'`, [runs]);
    assert.equal(outcomesBefore.map((o) => o.node).sort(), ['note', 'on', 'seen']);
    assert.is((await deviceNow(t, fan._id)).running, true);
    // Then someone switches the fan off again: an action done a second time would switch it back on.
    assert.is((await t.call('PUT', `/api/iotnodes/${fan._id}`, { body: { running: false } })).status, 200);
    await eventually(async () => ((await deviceNow(t, fan._id)).running === false ? true : undefined), 5000, 'the fan switched off');

    // The state a crash after the actions and before the batch's append of outcomes leaves: the runs started, the
    // fan's update stored, no outcome; the reactor's checkpoint before the trigger.
    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    await sql`DELETE FROM es.events WHERE stream_id = ANY(${runs}::text[]) AND type LIKE 'RuleAction%'`.execute(db);
    await sql`UPDATE es.streams SET revision = 0 WHERE stream_id = ANY(${runs}::text[])`.execute(db);
    await checkpointBefore(db, 'rules', `device-${boiler._id}`, 'DeviceUpdated');
    await db.destroy();

    // When the platform starts again and handles the batch again.
    t = await startTestPlatform({ databaseUrl: url });
    const after = await eventually(async () => {
      const stored = await eventsOf(t, `stream_id = ANY($1::text[]) AND type LIKE 'RuleAction%'`, [runs]);
      return stored.length >= 3 ? stored : undefined;
    }, 10_000, 'the outcomes to be stored again');
    await new Promise((r) => setTimeout(r, 300));

    // Then: one outcome per run and action, with the same ids as before the crash; the fan was not switched on again.
    const final = await eventsOf(t, `stream_id = ANY($1::text[]) AND type LIKE 'RuleAction%'`, [runs]);
    assert.equal(final.map((o) => o.node).sort(), ['note', 'on', 'seen']);
    assert.equal(final.map((o) => o.event_id).sort(), outcomesBefore.map((o) => o.event_id).sort(), 'an outcome has one id, whoever records it');
    assert.equal(final.map((o) => o.type), after.map((o) => o.type));
    assert.equal(final.map((o) => o.type), ['RuleActionSucceeded', 'RuleActionSucceeded', 'RuleActionSucceeded']);
    const byRules = await eventsOf(t, `stream_id = $1 AND metadata->>'actor' LIKE 'rule:%'`, [`device-${fan._id}`]);
    assert.is(byRules.length, 1, 'the fan was switched on once by a rule');
    assert.is((await deviceNow(t, fan._id)).running, false, 'the action done again did not switch the fan on a second time');
    assert.is((await eventsOf(t, `type = 'RuleRunStarted'`, [])).length, 2, 'no run was decided a second time');
  } finally {
    await t.stop();
  }
});

outcomes.run();
