import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deciderSpec } from '../support/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { ruleDecider, type RuleDefinition, type RuleEvent } from '../../domain/rules/rule.js';
import { MAX_RUN_DEPTH, compare, decideStart, plan, runDecider, type RunEvent, type RunStarted } from '../../domain/rules/run.js';
import { missedSlots } from '../../domain/rules/schedule.js';

const at = '2026-01-01T00:00:00.000Z';
const id = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const owner = '6f1c1c9e-8a55-4d0b-9d8a-0f5f2b3c4d5e';
const dev = 'bbbbbbbbbbbbbbbbbbbbbbbb';
const definition: RuleDefinition = {
  nodes: [
    { id: 'press', type: 'trigger', config: { resourceType: 'button' } },
    { id: 'hot', type: 'condition', config: { deviceId: dev, field: 't', operator: 'gt', value: 30 } },
    { id: 'cold', type: 'condition', config: { deviceId: dev, field: 't', operator: 'lt', value: 5 } },
    { id: 'fan', type: 'action', config: { action: 'setField', iotnodeId: dev, field: 'fan', value: true } },
    { id: 'heat', type: 'action', config: { action: 'setField', iotnodeId: dev, field: 'heat', value: true } },
    { id: 'note', type: 'action', config: { action: 'log', message: 'pressed' } },
  ],
  edges: [
    { from: 'press', to: 'hot' },
    { from: 'press', to: 'cold' },
    { from: 'hot', to: 'fan' },
    { from: 'cold', to: 'heat' },
    { from: 'press', to: 'note' },
  ],
};
const created: RuleEvent = { type: 'RuleCreated', data: { id, createdBy: owner, name: 'boiler.fan', definition, at } };

const rules = suite('rule decider');

rules('given no rule, when it is created, then RuleCreated with its owner', () => {
  deciderSpec(ruleDecider).given([]).when({ type: 'CreateRule', id, createdBy: owner, name: 'boiler.fan', definition, at }).then([created]);
});

rules('given a rule, when it is created again, then a conflict', () => {
  deciderSpec(ruleDecider).given([created]).when({ type: 'CreateRule', id, createdBy: owner, name: 'x', definition, at }).thenThrows(ConflictError);
});

rules('given a rule, when it is replaced with the same name and definition, then nothing; with another, RuleReplaced', () => {
  deciderSpec(ruleDecider).given([created]).when({ type: 'ReplaceRule', id, name: 'boiler.fan', definition: structuredClone(definition), at }).then([]);
  deciderSpec(ruleDecider).given([created]).when({ type: 'ReplaceRule', id, name: 'renamed', definition, at }).then([{ type: 'RuleReplaced', data: { id, name: 'renamed', definition, at } }]);
});

rules('given a deleted rule, when it is replaced or deleted, then not found', () => {
  const deleted: RuleEvent = { type: 'RuleDeleted', data: { id, at } };
  deciderSpec(ruleDecider).given([created, deleted]).when({ type: 'ReplaceRule', id, name: 'x', definition, at }).thenThrows(NotFoundError);
  deciderSpec(ruleDecider).given([created, deleted]).when({ type: 'DeleteRule', id, at }).thenThrows(NotFoundError);
});

rules('when a definition has a cycle, a dangling edge, an unreached action or a blank name, then a ValidationError naming it', () => {
  const bad = (change: (d: RuleDefinition) => void) => {
    const d = structuredClone(definition);
    change(d);
    return d;
  };
  const when = (d: RuleDefinition, name = 'x') => deciderSpec(ruleDecider).given([]).when({ type: 'CreateRule', id, createdBy: owner, name, definition: d, at });
  when(bad((d) => d.edges.push({ from: 'fan', to: 'hot' }))).thenThrows(ValidationError, /edges\.5\.from 'fan' is an action/);
  when(bad((d) => d.edges.push({ from: 'hot', to: 'cold' }, { from: 'cold', to: 'hot' }))).thenThrows(ValidationError, /edges form a cycle: hot → cold → hot/);
  when(bad((d) => d.edges.push({ from: 'hot', to: 'hot' }))).thenThrows(ValidationError, /edges form a cycle: hot → hot/);
  when(bad((d) => (d.edges[4]!.to = 'missing'))).thenThrows(ValidationError, /edges\.4\.to 'missing' names no node/);
  when(bad((d) => d.edges.pop())).thenThrows(ValidationError, /nodes\.5 \('note'\) is not reached from any trigger/);
  when(definition, '   ').thenThrows(ValidationError, /^ERR - name must not be blank/);
});

const runId = '11111111-2222-5333-8444-555555555555';
const view = (t: unknown) => ({ device: () => ({ doc: { t } }), changed: () => false });
const started = (t: number): RunStarted => decideStart({ id, name: 'boiler.fan', owner, definition }, { type: 'button', nodeId: 'press', userId: owner }, runId, 0, at, view(t));

rules('when a run is planned, then conditions on each branch decide which actions it reaches, in node order', () => {
  assert.equal(plan({ definition, triggerNodeId: 'press', ...view(40) }).actions.map((a) => a.nodeId), ['fan', 'note']);
  assert.equal(plan({ definition, triggerNodeId: 'press', ...view(0) }).actions.map((a) => a.nodeId), ['heat', 'note']);
  const unreadable = plan({ definition, triggerNodeId: 'press', device: () => ({ doc: null, why: 'no access' }), changed: () => false });
  assert.equal(unreadable.actions.map((a) => a.nodeId), ['note']);
  assert.equal(unreadable.conditions.map((c) => [c.nodeId, c.passed, c.why]), [['hot', false, 'no access'], ['cold', false, 'no access']]);
});

rules('comparisons: ordering needs numbers, eq compares JSON, changed follows the trigger', () => {
  assert.ok(compare('gte', 5, 5, false));
  assert.not.ok(compare('gt', '50', 5, false));
  assert.ok(compare('eq', { a: [1] }, { a: [1] }, false));
  assert.not.ok(compare('eq', undefined, null, false));
  assert.ok(compare('changed', 1, undefined, true));
  assert.not.ok(compare('changed', 1, undefined, false));
});

rules('given no run, when it starts, then RuleRunStarted; started again (the trigger handled twice), nothing', () => {
  const run = started(40);
  deciderSpec(runDecider).given([]).when({ type: 'StartRun', run }).then([{ type: 'RuleRunStarted', data: run }]);
  deciderSpec(runDecider).given([{ type: 'RuleRunStarted', data: run }]).when({ type: 'StartRun', run: started(0) }).then([]);
});

rules('given a started run, when an action outcome is recorded twice or for a node it did not plan, then only the first counts', () => {
  const run = started(40);
  const ok: RunEvent = { type: 'RuleActionSucceeded', data: { runId, ruleId: id, nodeId: 'fan', action: 'setField', detail: 'set', at } };
  deciderSpec(runDecider).given([{ type: 'RuleRunStarted', data: run }]).when({ type: 'RecordOutcome', event: ok as never }).then([ok]);
  deciderSpec(runDecider).given([{ type: 'RuleRunStarted', data: run }, ok]).when({ type: 'RecordOutcome', event: ok as never }).then([]);
  const other: RunEvent = { type: 'RuleActionFailed', data: { runId, ruleId: id, nodeId: 'heat', action: 'setField', reason: 'x', at } };
  deciderSpec(runDecider).given([{ type: 'RuleRunStarted', data: run }]).when({ type: 'RecordOutcome', event: other as never }).then([]);
  deciderSpec(runDecider).given([]).when({ type: 'RecordOutcome', event: ok as never }).thenThrows(NotFoundError);
});

rules('given no run, when the loop guard halts it, then RuleRunHalted, once', () => {
  const halted: RunEvent = { type: 'RuleRunHalted', data: { runId, ruleId: id, trigger: { type: 'schedule', nodeId: 's', slot: at }, depth: MAX_RUN_DEPTH + 1, chain: [id], reason: 'loop', at } };
  deciderSpec(runDecider).given([]).when({ type: 'HaltRun', event: halted as never }).then([halted]);
  deciderSpec(runDecider).given([halted]).when({ type: 'HaltRun', event: halted as never }).then([]);
});

rules('missed slots: the latest in the window and how many', () => {
  const { latest, count } = missedSlots('*/15 * * * *', undefined, new Date('2026-01-01T00:00:00Z'), new Date('2026-01-01T01:07:00Z'));
  assert.is(latest?.toISOString(), '2026-01-01T01:00:00.000Z');
  assert.is(count, 4);
  assert.equal(missedSlots('0 9 * * *', 'Europe/Stockholm', new Date('2026-06-01T06:00:00Z'), new Date('2026-06-01T07:30:00Z')), { latest: new Date('2026-06-01T07:00:00Z'), count: 1 });
  assert.equal(missedSlots('0 9 * * *', undefined, new Date('2026-06-01T09:00:00Z'), new Date('2026-06-01T10:00:00Z')), { latest: null, count: 0 });
});

rules.run();
