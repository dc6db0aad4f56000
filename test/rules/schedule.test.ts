/**
 * Schedule triggers across restarts: a slot runs once, the latest slot missed
 * during a short downtime runs once when the platform is back, and slots
 * missed during a long one are skipped and logged.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { edge, givenRule, logged, ruleLog } from './given.js';

const schedule = suite('rules v2: schedules across restarts');

const scheduled = (cron: string) => [{ id: 'tick', type: 'trigger' as const, config: { resourceType: 'schedule', cron } }, { id: 'note', type: 'action' as const, config: { action: 'log', message: 'ticked' } }];

/** The platform stopped, the rule made to look as if it was last written `ago` before now, and started again on the same database. */
async function downFor(t: TestPlatform, ruleIds: string[], ago: string): Promise<TestPlatform> {
  const url = t.platform.deps.config.databaseUrl!;
  await sql`UPDATE rules_v2 SET updated_at = now() - ${ago}::interval WHERE id = ANY(${ruleIds}::text[])`.execute(t.platform.deps.db);
  await t.stop();
  return startTestPlatform({ databaseUrl: url });
}

/**
 * Waits, when needed, until a whole minute is at least 15 s away. A rule that
 * runs every minute, created just before a minute's turn, would run that slot
 * before the platform stops; the restart then finds no slot missed since.
 */
async function clearOfMinuteTurn(): Promise<void> {
  const into = Date.now() % 60_000;
  if (into > 45_000) await new Promise((r) => setTimeout(r, 60_000 - into + 500));
}

schedule('when the platform was down for minutes, then the latest missed slot runs once, naming the slots missed; a restart does not run it again', async () => {
  let t = await startTestPlatform();
  try {
    await clearOfMinuteTurn();
    const minute = await givenRule(t, 'every minute', scheduled('* * * * *'), [edge('tick', 'note')]);
    const yearly = await givenRule(t, 'new year', scheduled('0 0 1 1 *'), [edge('tick', 'note')]);
    t = await downFor(t, [minute._id, yearly._id], '3 minutes 30 seconds');
    const run = await logged(t, minute._id, /^Run [\w-]+: schedule 'tick' at \S+; 1 action to take; [23] earlier slots were missed while the platform was down$/);
    await logged(t, minute._id, /^ticked$/);
    const slot = Date.parse(run.data!.trigger.slot);
    assert.ok(slot % 60_000 === 0 && Date.now() - slot < 120_000, `the latest slot, a whole minute of the last two: ${run.data!.trigger.slot}`);
    assert.equal((await ruleLog(t, yearly._id)).length, 0, 'a slot of a year ago is not run, and not logged as missed: the rule did not exist then');

    const before = (await ruleLog(t, minute._id)).filter((l) => l.data?.trigger?.slot === run.data!.trigger.slot).length;
    t = await downFor(t, [], '0 seconds');
    await new Promise((r) => setTimeout(r, 500));
    const slots = (await ruleLog(t, minute._id)).filter((l) => l.data?.trigger?.slot).map((l) => l.data!.trigger.slot as string);
    assert.is(slots.filter((s) => s === run.data!.trigger.slot).length, before, 'the slot ran once');
    assert.is(new Set(slots).size, slots.length, 'no slot ran twice');
  } finally {
    await t.stop();
  }
});

schedule('when the platform was down longer than the catch-up window, then nothing runs and the missed slots are logged on the rule', async () => {
  let t = await startTestPlatform();
  try {
    const yearly = await givenRule(t, 'new year', scheduled('0 0 1 1 *'), [edge('tick', 'note')]);
    t = await downFor(t, [yearly._id], '800 days');
    const missed = await logged(t, yearly._id, /^Schedule 'tick': [23] slots between \S+ and \S+ passed while the platform was down and were not run$/);
    assert.equal([missed.type, missed.priority, missed.category], ['warning', 'medium', 'rule']);
    assert.not.ok((await ruleLog(t, yearly._id)).some((l) => l.message === 'ticked'));
    const row = await t.platform.deps.db.selectFrom('rule_schedules').selectAll().where('rule_id', '=', yearly._id).executeTakeFirstOrThrow();
    assert.is(row.last_slot.toISOString(), missed.data!.to);
    // Started again: the skip is not logged a second time.
    t = await downFor(t, [], '0 seconds');
    await new Promise((r) => setTimeout(r, 500));
    assert.is((await ruleLog(t, yearly._id)).filter((l) => /^Schedule/.test(l.message)).length, 1);
  } finally {
    await t.stop();
  }
});

schedule.run();
