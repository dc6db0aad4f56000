import type { Decider } from '../shared/decider.js';
import { NotFoundError } from '../shared/errors.js';
import { causedId } from '../shared/ids.js';
import type { RecordedEvent } from '../shared/events.js';
import { jsonEqual, type DeviceDoc } from '../devices/device.js';
import type { LogEvent, LogPriority, LogType } from '../logs/logEntry.js';
import type { ActionConfig, ConditionConfig, RuleDefinition } from './rule.js';

/**
 * A run of a rule, on its own stream `rulerun-<runId>`. A run is decided
 * once (`RuleRunStarted`: the trigger, each condition's verdict and the
 * actions to take, with their configs as they were), then each action's
 * outcome is recorded (`RuleActionSucceeded`, `RuleActionFailed`) by the
 * rules reactor. The run id is derived from what triggered it (the device
 * event, the schedule slot), so a trigger handled again after a crash
 * decides the same run, whose start is then already stored; and each
 * action's effect carries an id derived from the run and the node, so it
 * is never done twice. `RuleRunHalted` records a run the loop guard
 * stopped; `RuleSlotsMissed` schedule slots that passed while the platform
 * was down and were not run.
 */
export type RunTrigger =
  | { type: 'button'; nodeId: string; userId: string }
  | { type: 'device'; nodeId: string; deviceId: string; eventId: string; eventType: string; fields: string[] }
  | { type: 'schedule'; nodeId: string; slot: string }
  | { type: 'geofence'; nodeId: string; geofenceId: string; trackerId: string; assetId: string; event: 'enter' | 'exit'; eventId: string };

export interface ConditionVerdict {
  nodeId: string;
  deviceId: string;
  field: string;
  operator: ConditionConfig['operator'];
  /** The field's value when the run was decided; absent when the device has no such field or cannot be read. */
  actual?: unknown;
  passed: boolean;
  /** Why a condition could not be evaluated (the owner cannot read the device). */
  why?: string;
}

export interface PlannedAction {
  nodeId: string;
  config: ActionConfig;
}

export interface RunStarted {
  runId: string;
  ruleId: string;
  ruleName: string;
  /** The rule's owner, whose rights the actions use. */
  owner: string;
  trigger: RunTrigger;
  /** 0 for a run no rule caused; one more than the run whose action caused this one's trigger. */
  depth: number;
  conditions: ConditionVerdict[];
  actions: PlannedAction[];
  /** Schedule slots before this one that passed while the platform was down and were not run. */
  missed?: number;
  at: string;
}

export interface ActionOutcome {
  runId: string;
  ruleId: string;
  nodeId: string;
  action: ActionConfig['action'];
  at: string;
}

export type RunEvent =
  | { type: 'RuleRunStarted'; data: RunStarted }
  | {
      type: 'RuleActionSucceeded';
      data: ActionOutcome & {
        /** What was done, in words, for the rule's log. */
        detail: string;
        /** The command it requested, or the event it wrote. */
        commandId?: string;
        eventId?: string;
        /** The entry of a log action. */
        log?: { message: string; type: LogType; priority: LogPriority };
      };
    }
  | { type: 'RuleActionFailed'; data: ActionOutcome & { reason: string } }
  | { type: 'RuleRunHalted'; data: { runId: string; ruleId: string; trigger: RunTrigger; depth: number; chain: string[]; reason: string; at: string } }
  | { type: 'RuleSlotsMissed'; data: { runId: string; ruleId: string; nodeId: string; from: string; to: string; count: number; latest: string; at: string } };

export type RunCommand =
  | { type: 'StartRun'; run: RunStarted }
  | { type: 'RecordOutcome'; event: Extract<RunEvent, { type: 'RuleActionSucceeded' | 'RuleActionFailed' }> }
  | { type: 'HaltRun'; event: Extract<RunEvent, { type: 'RuleRunHalted' }> }
  | { type: 'RecordMissed'; event: Extract<RunEvent, { type: 'RuleSlotsMissed' }> };

export type RunState = { status: 'none' | 'halted' | 'missed' } | { status: 'started'; run: RunStarted; done: string[] };

export const runStream = (runId: string) => `rulerun-${runId}`;
export const RUN_NOT_FOUND = 'Rule run not found';

/**
 * How deep a chain of runs may go, each caused by an action of the one
 * before (a rule setting a field on the device that triggers it): the run
 * that would be the next one is halted and logged instead.
 */
export const MAX_RUN_DEPTH = 8;

/** The event id of an action's outcome: one outcome per run and node, whoever records it and however often. */
export const outcomeId = (runId: string, nodeId: string): string => causedId(runId, ['outcome', runId, nodeId]);

/** The nodes still without an outcome. */
export const pendingActions = (state: RunState): PlannedAction[] => (state.status === 'started' ? state.run.actions.filter((a) => !state.done.includes(a.nodeId)) : []);

export const runDecider: Decider<RunCommand, RunState, RunEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'StartRun':
        // Decided once: the same trigger handled again finds its run already decided.
        return state.status === 'none' ? [{ type: 'RuleRunStarted', data: command.run }] : [];
      case 'RecordOutcome': {
        if (state.status !== 'started') throw new NotFoundError(RUN_NOT_FOUND);
        const { nodeId } = command.event.data;
        if (!state.run.actions.some((a) => a.nodeId === nodeId) || state.done.includes(nodeId)) return [];
        return [command.event];
      }
      case 'HaltRun':
      case 'RecordMissed':
        return state.status === 'none' ? [command.event] : [];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'RuleRunStarted':
        return { status: 'started', run: event.data, done: [] };
      case 'RuleActionSucceeded':
      case 'RuleActionFailed':
        return state.status === 'started' ? { ...state, done: [...state.done, event.data.nodeId] } : state;
      case 'RuleRunHalted':
        return { status: 'halted' };
      case 'RuleSlotsMissed':
        return { status: 'missed' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};

/** A device as a condition sees it: its document, or why it cannot be read. */
export type DeviceView = { doc: DeviceDoc } | { doc: null; why: string };

export interface PlanInput {
  definition: RuleDefinition;
  triggerNodeId: string;
  /** The device as the run sees it (its owner's rights applied). */
  device(deviceId: string): DeviceView;
  /** Whether the triggering event changed this field of this device. */
  changed(deviceId: string, field: string): boolean;
}

/** One comparison; numbers only for the ordering operators. */
export function compare(operator: ConditionConfig['operator'], actual: unknown, value: unknown, changed: boolean): boolean {
  switch (operator) {
    case 'changed':
      return changed;
    case 'eq':
      return actual !== undefined && jsonEqual(actual, value);
    case 'gt':
    case 'gte':
    case 'lt':
    case 'lte': {
      if (typeof actual !== 'number' || typeof value !== 'number') return false;
      return operator === 'gt' ? actual > value : operator === 'gte' ? actual >= value : operator === 'lt' ? actual < value : actual <= value;
    }
    default: {
      const _: never = operator;
      return _;
    }
  }
}

/**
 * What a run from one trigger does: follows the edges from the trigger,
 * evaluating each condition it reaches once, and collects the actions it
 * reaches through conditions that hold, in the order of the rule's nodes.
 */
export function plan(input: PlanInput): { conditions: ConditionVerdict[]; actions: PlannedAction[] } {
  const { definition } = input;
  const byId = new Map(definition.nodes.map((n) => [n.id, n]));
  const next = new Map<string, string[]>();
  for (const e of definition.edges) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const verdicts = new Map<string, ConditionVerdict>();
  const reached = new Set<string>();
  const stack = [input.triggerNodeId];
  while (stack.length) {
    for (const to of next.get(stack.pop()!) ?? []) {
      const node = byId.get(to);
      if (!node || reached.has(to)) continue;
      reached.add(to);
      if (node.type !== 'condition') continue;
      const verdict = evaluate(node.id, node.config, input);
      verdicts.set(node.id, verdict);
      if (verdict.passed) stack.push(node.id);
    }
  }
  const conditions: ConditionVerdict[] = [];
  const actions: PlannedAction[] = [];
  for (const node of definition.nodes) {
    if (node.type === 'condition' && verdicts.has(node.id)) conditions.push(verdicts.get(node.id)!);
    // An action is reached only through a trigger's edge or a condition that held.
    if (node.type === 'action' && reached.has(node.id)) actions.push({ nodeId: node.id, config: node.config });
  }
  return { conditions, actions };
}

function evaluate(nodeId: string, config: ConditionConfig, input: PlanInput): ConditionVerdict {
  const view = input.device(config.deviceId);
  const base = { nodeId, deviceId: config.deviceId, field: config.field, operator: config.operator };
  if (view.doc === null) return { ...base, passed: false, why: view.why };
  const actual = view.doc[config.field];
  const passed = compare(config.operator, actual, config.value, input.changed(config.deviceId, config.field));
  return { ...base, ...(actual !== undefined ? { actual } : {}), passed };
}

const describeTrigger = (t: RunTrigger): string => {
  switch (t.type) {
    case 'button':
      return `button '${t.nodeId}' pressed by user ${t.userId}`;
    case 'device':
      return `iotnode ${t.deviceId} changed${t.fields.length ? ` (${t.fields.slice(0, 10).join(', ')}${t.fields.length > 10 ? ', …' : ''})` : ''}`;
    case 'schedule':
      return `schedule '${t.nodeId}' at ${t.slot}`;
    case 'geofence':
      return `iotnode ${t.assetId} ${t.event === 'enter' ? 'entered' : 'left'} geofence ${t.geofenceId}`;
    default: {
      const _: never = t;
      return _;
    }
  }
};

const RUN_EVENTS = new Set(['RuleRunStarted', 'RuleActionSucceeded', 'RuleActionFailed', 'RuleRunHalted', 'RuleSlotsMissed']);

/**
 * The entry a run event puts in its rule's log (`resourceType: ruleV2`,
 * category `rule`), with the event's id as the entry's: the log is built
 * from the run events alone, so a rebuild gives it back exactly.
 */
export function runLogEntry(e: RecordedEvent): LogEvent['data'] | null {
  if (!RUN_EVENTS.has(e.type)) return null;
  const event = e as unknown as RunEvent;
  const base = { id: e.id, resourceId: event.data.ruleId, resourceType: 'ruleV2', category: 'rule' as const, at: event.data.at };
  switch (event.type) {
    case 'RuleRunStarted': {
      const { runId, trigger, actions, conditions, depth, missed } = event.data;
      const failed = conditions.filter((c) => !c.passed).map((c) => `'${c.nodeId}'${c.why ? ` (${c.why})` : ''}`);
      const what = actions.length ? `${actions.length} action${actions.length === 1 ? '' : 's'} to take` : `nothing to do${failed.length ? `: condition ${failed.join(', ')} did not hold` : ''}`;
      const late = missed ? `; ${missed} earlier slot${missed === 1 ? ' was' : 's were'} missed while the platform was down` : '';
      return { ...base, type: 'info', priority: 'low', message: `Run ${runId}: ${describeTrigger(trigger)}; ${what}${late}`, data: { runId, trigger, depth, conditions, actions: actions.map((a) => a.nodeId) } };
    }
    case 'RuleActionSucceeded': {
      const { runId, nodeId, action, detail, log } = event.data;
      if (log) return { ...base, type: log.type, priority: log.priority, message: log.message, data: { runId, nodeId, action } };
      return { ...base, type: 'info', priority: 'low', message: `Run ${runId}: action '${nodeId}' (${action}): ${detail}`, data: { runId, nodeId, action, ...(event.data.commandId ? { commandId: event.data.commandId } : {}) } };
    }
    case 'RuleActionFailed': {
      const { runId, nodeId, action, reason } = event.data;
      return { ...base, type: 'error', priority: 'high', message: `Run ${runId}: action '${nodeId}' (${action}) failed: ${reason}`, data: { runId, nodeId, action } };
    }
    case 'RuleRunHalted':
      return { ...base, type: 'warning', priority: 'high', message: `Run ${event.data.runId} stopped: ${event.data.reason}`, data: { runId: event.data.runId, trigger: event.data.trigger, depth: event.data.depth, chain: event.data.chain } };
    case 'RuleSlotsMissed': {
      const { count, from, to, nodeId } = event.data;
      return { ...base, type: 'warning', priority: 'medium', message: `Schedule '${nodeId}': ${count >= 10_000 ? 'at least 10000' : count} slot${count === 1 ? '' : 's'} between ${from} and ${to} passed while the platform was down and were not run`, data: { nodeId, from, to, count } };
    }
    default: {
      const _: never = event;
      return _;
    }
  }
}

/** A rule as a run needs it. */
export interface RunnableRule {
  id: string;
  name: string;
  owner: string;
  definition: RuleDefinition;
}

/** The run a trigger starts: its conditions evaluated, its actions planned. */
export function decideStart(
  rule: RunnableRule,
  trigger: RunTrigger,
  runId: string,
  depth: number,
  at: string,
  input: Pick<PlanInput, 'device' | 'changed'>,
  missed?: number,
): RunStarted {
  const { conditions, actions } = plan({ definition: rule.definition, triggerNodeId: trigger.nodeId, ...input });
  return { runId, ruleId: rule.id, ruleName: rule.name, owner: rule.owner, trigger, depth, conditions, actions, ...(missed ? { missed } : {}), at };
}

const conditionDevicesOf = new WeakMap<RuleDefinition, readonly string[]>();

/** The device ids a run from this trigger may evaluate conditions on; worked out once per definition (a rule's runs share it). */
export function conditionDevices(definition: RuleDefinition): readonly string[] {
  let ids = conditionDevicesOf.get(definition);
  if (!ids) {
    ids = Object.freeze([...new Set(definition.nodes.flatMap((n) => (n.type === 'condition' ? [n.config.deviceId] : [])))]);
    conditionDevicesOf.set(definition, ids);
  }
  return ids;
}
