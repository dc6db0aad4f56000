import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { jsonEqual } from '../devices/device.js';
import { cronProblem, isTimeZone } from './schedule.js';

/**
 * A rule (rule v2): a name and a graph. Trigger nodes start a run (a button
 * press, a device's report, a schedule slot, a geofence crossing); condition
 * nodes compare device fields; action nodes act (a device command, a field
 * set on a device, a message through a channel, a log entry). Edges go from
 * a trigger or a condition to a condition or an action. A run follows the
 * edges from its trigger: a condition that holds lets the run on to what it
 * points at, one that fails stops that branch. Conditions in a chain must
 * all hold (and); an action reached by several edges runs once when any of
 * its paths holds (or). The shapes of the node configs are schemas of the
 * OpenAPI document; this module checks the graph.
 */
export type ButtonTrigger = { resourceType: 'button' };
export type DeviceTrigger = { resourceType: 'device'; deviceId: string; fields?: string[] };
export type ScheduleTrigger = { resourceType: 'schedule'; cron: string; timezone?: string };
export type GeofenceTrigger = { resourceType: 'geofence'; geofenceId: string; event: 'enter' | 'exit' };
export type TriggerConfig = ButtonTrigger | DeviceTrigger | ScheduleTrigger | GeofenceTrigger;

export const OPERATORS = ['gt', 'gte', 'eq', 'lte', 'lt', 'changed'] as const;
export type Operator = (typeof OPERATORS)[number];
export type ConditionConfig = { deviceId: string; field: string; operator: Operator; value?: unknown };

export type CommandAction = { action: 'command'; iotnodeId: string; command: string; integrationName?: string; data?: Record<string, unknown> };
export type SetFieldAction = { action: 'setField'; iotnodeId: string; field: string; value: unknown };
export type ChannelAction = { action: 'channel'; channelId: string; message?: string };
export type LogAction = { action: 'log'; message: string; type?: 'error' | 'warning' | 'info' | 'verbose' | 'debug'; priority?: 'severe' | 'high' | 'medium' | 'low' };
export type ActionConfig = CommandAction | SetFieldAction | ChannelAction | LogAction;

export type RuleNode =
  | { id: string; type: 'trigger'; config: TriggerConfig }
  | { id: string; type: 'condition'; config: ConditionConfig }
  | { id: string; type: 'action'; config: ActionConfig };
export type NodeType = RuleNode['type'];
export const NODE_TYPES: readonly NodeType[] = ['trigger', 'condition', 'action'];

export interface Edge {
  from: string;
  to: string;
}

export interface RuleDefinition {
  nodes: RuleNode[];
  edges: Edge[];
}

/**
 * Caps on a definition, past which it is refused with 422 (docs/rules.md):
 * a rule is configuration that runs on every matching report, so its size
 * bounds the work one report can cause.
 */
export const RULE_LIMITS = {
  nodes: 100,
  edges: 500,
  /** The definition as JSON. */
  definitionBytes: 64 * 1024,
  name: 200,
};

export type RuleEvent =
  | { type: 'RuleCreated'; data: { id: string; createdBy: string; name: string; definition: RuleDefinition; at: string } }
  | { type: 'RuleReplaced'; data: { id: string; name: string; definition: RuleDefinition; at: string } }
  | { type: 'RuleDeleted'; data: { id: string; at: string } };

export type RuleCommand =
  | { type: 'CreateRule'; id: string; createdBy: string; name: string; definition: RuleDefinition; at: string }
  | { type: 'ReplaceRule'; id: string; name: string; definition: RuleDefinition; at: string }
  | { type: 'DeleteRule'; id: string; at: string };

export type RuleState = { status: 'none' | 'deleted' } | { status: 'active'; id: string; name: string; definition: RuleDefinition; createdBy: string };

export const ruleStream = (id: string) => `rule-${id}`;
export const RULE_NOT_FOUND = 'Rule not found';

/** Who a rule's actions are written by, in event metadata and logs. */
export const ruleActor = (id: string) => `rule:${id}`;

export function checkName(name: string): string {
  const trimmed = name.trim();
  if (trimmed === '') throw ValidationError.field('name', 'must not be blank');
  if (name.length > RULE_LIMITS.name) throw ValidationError.field('name', `must have at most ${RULE_LIMITS.name} characters`);
  return name;
}

/**
 * The graph's rules, on a definition whose node configs already have their
 * shapes: within the caps, unique node ids, edges between existing nodes in
 * the allowed directions, no cycle, every condition and action reached from
 * a trigger and every condition leading somewhere, a cron that fires after `now`.
 */
export function checkDefinition(definition: RuleDefinition, now: Date): void {
  const bytes = Buffer.byteLength(JSON.stringify(definition));
  if (bytes > RULE_LIMITS.definitionBytes) throw ValidationError.field('definition', `is ${bytes} bytes of JSON; at most ${RULE_LIMITS.definitionBytes} are allowed`);
  const { nodes, edges } = definition;
  if (nodes.length > RULE_LIMITS.nodes) throw ValidationError.field('definition.nodes', `has ${nodes.length} nodes; at most ${RULE_LIMITS.nodes} are allowed`);
  if (edges.length > RULE_LIMITS.edges) throw ValidationError.field('definition.edges', `has ${edges.length} edges; at most ${RULE_LIMITS.edges} are allowed`);
  const byId = new Map<string, RuleNode>();
  nodes.forEach((node, i) => {
    if (byId.has(node.id)) throw ValidationError.field(`definition.nodes.${i}.id`, `'${node.id}' is the id of an earlier node; node ids must be unique`);
    byId.set(node.id, node);
    if (node.type === 'trigger' && node.config.resourceType === 'schedule') {
      const { cron, timezone } = node.config;
      if (timezone !== undefined && !isTimeZone(timezone)) throw ValidationError.field(`definition.nodes.${i}.config.timezone`, `'${timezone}' is not an IANA time zone name (such as Europe/Stockholm)`);
      const problem = cronProblem(cron, timezone, now);
      if (problem) throw ValidationError.field(`definition.nodes.${i}.config.cron`, problem);
    }
    if (node.type === 'condition') checkCondition(node.config, `definition.nodes.${i}.config`);
  });
  const next = new Map<string, string[]>();
  const seen = new Set<string>();
  edges.forEach((edge, i) => {
    const from = byId.get(edge.from);
    const to = byId.get(edge.to);
    if (!from) throw ValidationError.field(`definition.edges.${i}.from`, `'${edge.from}' names no node of the rule`);
    if (!to) throw ValidationError.field(`definition.edges.${i}.to`, `'${edge.to}' names no node of the rule`);
    if (from.type === 'action') throw ValidationError.field(`definition.edges.${i}.from`, `'${edge.from}' is an action; edges lead from a trigger or a condition`);
    if (to.type === 'trigger') throw ValidationError.field(`definition.edges.${i}.to`, `'${edge.to}' is a trigger; edges lead to a condition or an action`);
    const key = `${edge.from}\u0000${edge.to}`;
    if (seen.has(key)) throw ValidationError.field(`definition.edges.${i}`, `repeats the edge from '${edge.from}' to '${edge.to}'`);
    seen.add(key);
    next.set(edge.from, [...(next.get(edge.from) ?? []), edge.to]);
  });
  const cycle = findCycle(nodes.filter((n) => n.type === 'condition').map((n) => n.id), next);
  if (cycle) throw ValidationError.field('definition.edges', `form a cycle: ${cycle.join(' → ')}`);
  const reached = new Set<string>();
  const stack = nodes.filter((n) => n.type === 'trigger').map((n) => n.id);
  while (stack.length) {
    for (const to of next.get(stack.pop()!) ?? []) if (!reached.has(to)) reached.add(to), stack.push(to);
  }
  nodes.forEach((node, i) => {
    if (node.type === 'trigger') return;
    if (!reached.has(node.id)) throw ValidationError.field(`definition.nodes.${i}`, `('${node.id}') is not reached from any trigger: add an edge to it`);
    if (node.type === 'condition' && !next.get(node.id)?.length) throw ValidationError.field(`definition.nodes.${i}`, `('${node.id}') is a condition that leads nowhere: add an edge from it to a condition or an action`);
  });
}

function checkCondition(config: ConditionConfig, at: string): void {
  const { operator, value } = config;
  if (operator === 'changed') {
    if (value !== undefined) throw ValidationError.field(`${at}.value`, 'is not used by the changed operator; leave it out');
    return;
  }
  if (value === undefined) throw ValidationError.field(`${at}.value`, `is required with the ${operator} operator`);
  if (operator !== 'eq' && (typeof value !== 'number' || !Number.isFinite(value))) throw ValidationError.field(`${at}.value`, `must be a number with the ${operator} operator`);
}

/** A cycle among the conditions (only they can be on one: triggers have no edges in, actions none out), as node ids; null if none. */
function findCycle(ids: string[], next: Map<string, string[]>): string[] | null {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (id: string): string[] | null => {
    state.set(id, 'open');
    path.push(id);
    for (const to of next.get(id) ?? []) {
      if (state.get(to) === 'open') return [...path.slice(path.indexOf(to)), to];
      if (!state.has(to)) {
        const found = visit(to);
        if (found) return found;
      }
    }
    path.pop();
    state.set(id, 'done');
    return null;
  };
  for (const id of ids) {
    if (state.has(id)) continue;
    const found = visit(id);
    if (found) return found;
  }
  return null;
}

/** The ids a rule points at, by what it needs of them: read (triggers, conditions) or write (actions). */
export function referencesOf(definition: RuleDefinition): { node: number; field: string; id: string; kind: 'device' | 'geofence' | 'channel'; need: 'read' | 'write' }[] {
  const out: ReturnType<typeof referencesOf> = [];
  definition.nodes.forEach((node, i) => {
    const at = `definition.nodes.${i}.config`;
    if (node.type === 'trigger') {
      if (node.config.resourceType === 'device') out.push({ node: i, field: `${at}.deviceId`, id: node.config.deviceId, kind: 'device', need: 'read' });
      if (node.config.resourceType === 'geofence') out.push({ node: i, field: `${at}.geofenceId`, id: node.config.geofenceId, kind: 'geofence', need: 'read' });
    } else if (node.type === 'condition') {
      out.push({ node: i, field: `${at}.deviceId`, id: node.config.deviceId, kind: 'device', need: 'read' });
    } else if (node.config.action === 'command' || node.config.action === 'setField') {
      out.push({ node: i, field: `${at}.iotnodeId`, id: node.config.iotnodeId, kind: 'device', need: 'write' });
    } else if (node.config.action === 'channel') {
      out.push({ node: i, field: `${at}.channelId`, id: node.config.channelId, kind: 'channel', need: 'write' });
    }
  });
  return out;
}

export const ruleDecider: Decider<RuleCommand, RuleState, RuleEvent> = {
  initialState: () => ({ status: 'none' }),
  decide(command, state) {
    switch (command.type) {
      case 'CreateRule':
        if (state.status !== 'none') throw new ConflictError(`Rule ${command.id} already exists`);
        checkDefinition(command.definition, new Date(command.at));
        return [{ type: 'RuleCreated', data: { id: command.id, createdBy: command.createdBy, name: checkName(command.name), definition: command.definition, at: command.at } }];
      case 'ReplaceRule':
        if (state.status !== 'active') throw new NotFoundError(RULE_NOT_FOUND);
        checkDefinition(command.definition, new Date(command.at));
        if (state.name === command.name && jsonEqual(state.definition, command.definition)) return [];
        return [{ type: 'RuleReplaced', data: { id: command.id, name: checkName(command.name), definition: command.definition, at: command.at } }];
      case 'DeleteRule':
        if (state.status !== 'active') throw new NotFoundError(RULE_NOT_FOUND);
        return [{ type: 'RuleDeleted', data: { id: command.id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'RuleCreated':
        return { status: 'active', id: event.data.id, name: event.data.name, definition: event.data.definition, createdBy: event.data.createdBy };
      case 'RuleReplaced':
        return state.status === 'active' ? { ...state, name: event.data.name, definition: event.data.definition } : state;
      case 'RuleDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
