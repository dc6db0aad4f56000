/**
 * After a restart the rules reactor holds the rules as they were at its
 * checkpoint, so the events it had not handled yet meet the rules that held
 * for them: a rule deleted after those events still runs for them.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { CompiledQuery, Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { edge, givenDevice, givenRule, logAction, logged, onDevice, checkpointBefore } from './given.js';

const restart = suite('rules v2: the rules at the checkpoint after a restart');

const runsOf = async (t: TestPlatform, ruleId: string): Promise<string[]> =>
  (
    await t.platform.deps.db.executeQuery<{ stream_id: string }>(
      CompiledQuery.raw(`SELECT stream_id FROM es.events WHERE type = 'RuleRunStarted' AND data->>'ruleId' = $1 ORDER BY transaction_id, global_position`, [ruleId]),
    )
  ).rows.map((r) => r.stream_id);

restart('given a report the reactor had not handled when the rule it triggers was deleted, when the platform starts again, then the rule runs for that report once', async () => {
  let t = await startTestPlatform();
  try {
    const boiler = await givenDevice(t, 'boiler', { temperature: 20 });
    const watch = await givenRule(t, 'watch', [onDevice('report', boiler._id, ['temperature']), logAction('seen', 'boiler changed')], [edge('report', 'seen')]);
    const report = await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 60 } });
    assert.is(report.status, 200, report.text);
    await logged(t, watch._id, /^boiler changed$/);
    const runs = await runsOf(t, watch._id);
    assert.is(runs.length, 1);
    const deleted = await t.call('DELETE', `/api/rules-v2/${watch._id}`);
    assert.is(deleted.status, 204, deleted.text);

    // The state of a reactor that had fallen behind: its checkpoint before the report, the run not decided yet,
    // while the rule's deletion after the report is stored and projected.
    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    await sql`DELETE FROM es.events WHERE stream_id = ANY(${runs}::text[])`.execute(db);
    await sql`DELETE FROM es.streams WHERE stream_id = ANY(${runs}::text[])`.execute(db);
    await checkpointBefore(db, 'rules', `device-${boiler._id}`, 'DeviceUpdated');
    await db.destroy();

    // When the platform starts again,
    t = await startTestPlatform({ databaseUrl: url });
    // then the run the report set off is decided again, with the id it had, and only once.
    const again = await eventually(async () => {
      const found = await runsOf(t, watch._id);
      return found.length > 0 ? found : undefined;
    }, 10_000, 'the run of the deleted rule for the report before its deletion');
    assert.equal(again, runs);
    const later = await t.call('PUT', `/api/iotnodes/${boiler._id}`, { body: { temperature: 70 } });
    assert.is(later.status, 200, later.text);
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(await runsOf(t, watch._id), runs, 'a report after the deletion runs nothing');
  } finally {
    await t.stop();
  }
});

restart.run();
