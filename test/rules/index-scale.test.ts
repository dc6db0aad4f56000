/**
 * The rules reactor's index and clock at the scale one author can reach with
 * the per-rule caps alone (100 nodes a rule): a lookup after any number of
 * rule changes is rebuilt once, and the clock finds its soonest slot among any
 * number of schedule triggers (a spread of them into one call overflowed the
 * stack past about 125,000, stopping every tenant's schedules and the
 * platform's start).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { RuleIndex } from '../../reactors/rules/ruleIndex.js';
import { Scheduler } from '../../reactors/rules/scheduler.js';
import type { RuleDefinition, RuleNode } from '../../domain/rules/rule.js';
import type { ReactorDeps } from '../../reactors/deps.js';
import type { Fence } from '../../domain/eventstore/leases.js';

const scale = suite('rules at the scale of the per-rule caps');

const rule = (id: string, nodes: RuleNode[]) => ({ id, name: id, owner: 'u1', definition: { nodes, edges: [] } satisfies RuleDefinition });

scale('given 1,400 rules of 100 yearly schedule triggers each, when the clock is set, then it is armed for the soonest slot among all 140,000', async () => {
  const index = new RuleIndex();
  for (let r = 0; r < 1400; r++) {
    const nodes: RuleNode[] = Array.from({ length: 100 }, (_, n) => ({ id: `t${n}`, type: 'trigger', config: { resourceType: 'schedule', cron: `${n % 60} ${r % 24} 1 1 *` } }));
    index.put(rule(`r${r}`, nodes), 0);
  }
  // One rule whose slot comes first: every minute.
  index.put(rule('soonest', [{ id: 'tick', type: 'trigger', config: { resourceType: 'schedule', cron: '* * * * *' } }]), 0);
  assert.is(index.scheduleTriggers().length, 140_001);

  const now = new Date('2026-06-15T10:20:30.000Z');
  const fired: string[] = [];
  const deps = { clock: () => now, log: pino({ level: 'silent' }) } as unknown as ReactorDeps;
  let armedFor: number | null = null;
  const realSetTimeout = globalThis.setTimeout;
  const scheduler = new Scheduler(deps, index, async (r, nodeId) => void fired.push(`${r.id}/${nodeId}`), () => ({}) as Fence);
  try {
    // The wait the clock arms is what says which slot it found soonest.
    globalThis.setTimeout = ((fn: () => void, ms: number) => {
      armedFor = ms;
      return realSetTimeout(() => {}, 0);
    }) as typeof setTimeout;
    scheduler.changed();
  } finally {
    globalThis.setTimeout = realSetTimeout;
    await scheduler.stop();
  }
  assert.is(armedFor, 30_000, 'the every-minute slot, 30 s away');
  assert.equal(fired, []);
});

scale('given 200 rules of 100 device triggers on one device, when the triggers are looked up, then every one is there, in the rules’ order', () => {
  const index = new RuleIndex();
  for (let r = 0; r < 200; r++) {
    index.put(rule(`r${r}`, Array.from({ length: 100 }, (_, n) => ({ id: `d${n}`, type: 'trigger', config: { resourceType: 'device', deviceId: 'dev1' } }))), 0);
  }
  const triggers = index.deviceTriggers('dev1');
  assert.is(triggers.length, 20_000);
  assert.is(`${triggers[0]!.rule.id}/${triggers[0]!.nodeId}`, 'r0/d0');
  assert.is(`${triggers[19_999]!.rule.id}/${triggers[19_999]!.nodeId}`, 'r199/d99');
  assert.ok(index.watches('dev1'));
  index.apply({ type: 'RuleDeleted', data: { id: 'r0', at: '2026-01-01T00:00:00.000Z' }, revision: 1 } as never);
  assert.is(index.deviceTriggers('dev1').length, 19_900, 'a deletion is seen at the next lookup');
});

scale.run();
