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
import { button, edge, givenDevice, givenRule, logAction, logged, onDevice, checkpointBefore } from './given.js';
import { receiver } from '../support/receiver.js';
import { runStream } from '../../domain/rules/run.js';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';

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

restart('given a channel action whose receiver holds the POST unanswered, when the platform stops, then it stops at once with no outcome recorded, and after a restart the message is posted again under the same idempotency key', async () => {
  let answer: number | null = null;
  const r = await receiver(() => answer);
  let t = await startTestPlatform();
  try {
    const valve = await givenDevice(t, 'valve');
    const channel = await t.call('POST', '/api/channels', { body: { iotnode: valve._id, http: { url: r.url } } });
    assert.is(channel.status, 201, channel.text);
    const rule = await givenRule(t, 'valve.notify', [button(), { id: 'tell', type: 'action', config: { action: 'channel', channelId: channel.body._id, message: 'checked' } }], [edge('press', 'tell')]);
    const run = await t.call('POST', `/api/rules-v2/${rule._id}/execute`, { body: { triggerNodeId: 'press' } });
    assert.is(run.status, 202, run.text);
    const held = await eventually(async () => r.received.find((x) => x.body.runId === run.body.runId), 10_000, 'the POST to reach the receiver');

    // When the platform stops while the POST waits for its answer,
    const url = t.platform.deps.config.databaseUrl!;
    const started = Date.now();
    await t.stop();
    // then it stops without waiting out the attempts (3 of 5 s each), and records nothing for the action.
    assert.ok(Date.now() - started < 8000, `stopped in ${Date.now() - started} ms`);
    const outcomes = async () => (await t.platform.deps.store.readStream(runStream(run.body.runId))).filter((e) => e.type.startsWith('RuleAction')).map((e) => e.type);
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const stored = (await createPostgresStore(pool).readStream(runStream(run.body.runId))).map((e) => e.type);
    await pool.end();
    assert.equal(stored, ['RuleRunStarted']);

    // When it starts again and the receiver answers,
    answer = 200;
    t = await startTestPlatform({ databaseUrl: url });
    // then the message is posted again with the same id, and the action succeeds.
    await eventually(async () => ((await outcomes()).length ? true : undefined), 10_000, 'the action\'s outcome after the restart');
    assert.equal(await outcomes(), ['RuleActionSucceeded']);
    const posts = r.received.filter((x) => x.body.runId === run.body.runId);
    assert.ok(posts.length >= 2);
    assert.equal(new Set(posts.map((p) => p.headers['idempotency-key'])), new Set([held.headers['idempotency-key']]));
  } finally {
    await t.stop();
    await r.close();
  }
});

restart.run();
