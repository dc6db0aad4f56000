import type { ReactorDeps } from '../deps.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { LeaseLostError, type Fence } from '../../domain/eventstore/leases.js';
import type { RuleDefinition } from '../../domain/rules/rule.js';
import { runStream, type RunnableRule } from '../../domain/rules/run.js';
import { derivedId } from '../../domain/shared/ids.js';
import { SCHEDULE_CATCH_UP_MS, missedSlots, nextSlot } from '../../domain/rules/schedule.js';
import type { RuleIndex, ScheduleEntry } from './ruleIndex.js';

/** A timer never waits longer than this before looking at the clock again (clock changes, very distant slots). */
export const MAX_WAIT_MS = 60_000;
/** A slot whose run could not be stored is tried again this often, while it is within the catch-up window. */
const RETRY_MS = 1_000;

const keyOf = (e: ScheduleEntry) => `${e.rule.id}/${e.nodeId}`;

/**
 * The clock side of schedule triggers. Each schedule trigger of the rules
 * the reactor knows has its next slot; when it comes, `fire` decides and
 * stores the run, with an id derived from the rule, the node and the slot,
 * so a slot runs once even if it is fired again (a restart, a second
 * process). At start, the slots that passed while the platform was down are
 * looked at once (from each trigger's last decided slot in
 * `rule_schedules`): the latest runs if it is at most
 * `SCHEDULE_CATCH_UP_MS` late, and the others are recorded as missed.
 * A timer that fires late (the process stalled) runs the slot that was due
 * and goes on from the clock's time, so a stall never causes a burst.
 */
export class Scheduler {
  private timer: NodeJS.Timeout | null = null;
  private next = new Map<string, { entry: ScheduleEntry; at: Date }>();
  private stopped = false;
  private busy: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: ReactorDeps,
    private readonly index: RuleIndex,
    private readonly fire: (rule: RunnableRule, nodeId: string, slot: Date, missed: number) => Promise<void>,
    /** Proves this node still keeps the clock (it leads the rules reactor; always, in a single process). */
    private readonly fence: () => Fence,
    /** The longest a timer waits before looking at the clock again (`MAX_WAIT_MS`): a clock moved forward is seen within it. */
    private readonly maxWaitMs = MAX_WAIT_MS,
  ) {}

  /** Catches up and starts the clock; again after a `stop` (in a cluster: each time this node takes the lead of the rules). */
  async start(): Promise<void> {
    this.stopped = false;
    this.next.clear();
    await this.catchUp();
    this.changed();
  }

  /** Stops the clock; resolves once a slot being fired is done, so nothing fires after. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.busy;
  }

  /** The rules changed: slots for new or changed triggers, none for removed ones. */
  changed(): void {
    if (this.stopped) return;
    const now = this.deps.clock();
    const seen = new Set<string>();
    for (const entry of this.index.scheduleTriggers()) {
      const key = keyOf(entry);
      seen.add(key);
      const current = this.next.get(key);
      if (current && current.entry.cron === entry.cron && current.entry.timezone === entry.timezone) {
        current.entry = entry;
        continue;
      }
      const at = nextSlot(entry.cron, entry.timezone, now);
      if (at) this.next.set(key, { entry, at });
      else this.next.delete(key);
    }
    for (const key of this.next.keys()) if (!seen.has(key)) this.next.delete(key);
    this.arm();
  }

  private arm(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.stopped || this.next.size === 0) return;
    // A loop, not Math.min(...all): a spread of every tenant's triggers into one call overflows the stack past about 125,000.
    let soonest = Infinity;
    for (const { at } of this.next.values()) soonest = Math.min(soonest, at.getTime());
    const wait = Math.max(0, Math.min(this.maxWaitMs, soonest - this.deps.clock().getTime()));
    this.timer = setTimeout(() => {
      this.busy = this.busy.then(() => this.tick());
    }, wait);
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    const now = this.deps.clock();
    for (const [key, { entry, at }] of [...this.next]) {
      if (this.stopped) return;
      if (at.getTime() > now.getTime()) continue;
      try {
        await this.fire(entry.rule, entry.nodeId, at, 0);
      } catch (err) {
        // Another node leads the rules now: it keeps the clock.
        if (err instanceof LeaseLostError) return;
        this.deps.log.error({ err, ruleId: entry.rule.id, nodeId: entry.nodeId, slot: at.toISOString() }, 'a scheduled rule run could not be stored; trying again');
        if (now.getTime() - at.getTime() < SCHEDULE_CATCH_UP_MS && !this.stopped) {
          if (this.timer) clearTimeout(this.timer);
          this.timer = setTimeout(() => (this.busy = this.busy.then(() => this.tick())), RETRY_MS);
          this.timer.unref();
          return;
        }
      }
      const following = nextSlot(entry.cron, entry.timezone, now);
      if (following && this.next.get(key)?.at === at) this.next.set(key, { entry, at: following });
      else if (!following) this.next.delete(key);
    }
    this.arm();
  }

  /** The slots that passed while the platform was down, from the read models (the log may still be catching up). */
  private async catchUp(): Promise<void> {
    const now = this.deps.clock();
    const rules = await this.deps.db.selectFrom('rules_v2').select(['id', 'name', 'created_by', 'definition', 'updated_at']).execute();
    const last = new Map((await this.deps.db.selectFrom('rule_schedules').selectAll().execute()).map((r) => [`${r.rule_id}/${r.node_id}`, r.last_slot]));
    for (const row of rules) {
      const rule: RunnableRule = { id: row.id, name: row.name, owner: row.created_by, definition: row.definition as RuleDefinition };
      for (const node of rule.definition.nodes) {
        if (this.stopped) return;
        if (node.type !== 'trigger' || node.config.resourceType !== 'schedule') continue;
        const { cron, timezone } = node.config;
        const previous = last.get(`${row.id}/${node.id}`);
        // Slots before the rule had this definition never count.
        const from = previous && previous > row.updated_at ? previous : row.updated_at;
        const { latest, count } = missedSlots(cron, timezone, from, now);
        if (!latest) continue;
        try {
          if (now.getTime() - latest.getTime() <= SCHEDULE_CATCH_UP_MS) await this.fire(rule, node.id, latest, count - 1);
          else await this.recordMissed(rule, node.id, from, latest, count);
        } catch (err) {
          if (err instanceof LeaseLostError) return;
          this.deps.log.error({ err, ruleId: rule.id, nodeId: node.id }, 'catching up a schedule failed');
        }
      }
    }
  }

  private async recordMissed(rule: RunnableRule, nodeId: string, from: Date, latest: Date, count: number): Promise<void> {
    const runId = derivedId('schedule', rule.id, nodeId, latest.toISOString());
    const at = this.deps.clock().toISOString();
    const event = { type: 'RuleSlotsMissed', data: { runId, ruleId: rule.id, nodeId, from: from.toISOString(), to: latest.toISOString(), count, latest: latest.toISOString(), at } };
    await this.fence().check();
    await this.deps.store.append(runStream(runId), [toNewEvent(event, { actor: 'system:rules', correlationId: `schedule:${rule.id}/${nodeId}`, now: at }, runId)], 'any');
  }
}
