import type { RecordedEvent } from '../../domain/shared/events.js';
import type { RuleDefinition, RuleEvent } from '../../domain/rules/rule.js';
import type { RunnableRule } from '../../domain/rules/run.js';

export interface DeviceTriggerEntry {
  rule: RunnableRule;
  nodeId: string;
  /** Only a change carrying one of these fires it; every change when absent. */
  fields?: Set<string>;
}

export interface GeofenceTriggerEntry {
  rule: RunnableRule;
  nodeId: string;
  geofenceId: string;
  event: 'enter' | 'exit';
}

export interface ScheduleEntry {
  rule: RunnableRule;
  nodeId: string;
  cron: string;
  timezone?: string;
}

/**
 * The rules in memory, as of the reactor's place in the log, with the
 * lookups a device event needs: which triggers watch a device, and which
 * devices any rule reads (triggers and conditions), so every other device's
 * events are passed over without folding them.
 */
export class RuleIndex {
  private rules = new Map<string, { rule: RunnableRule; revision: number }>();
  private byDevice = new Map<string, DeviceTriggerEntry[]>();
  private watched = new Set<string>();
  private geofences: GeofenceTriggerEntry[] = [];
  private schedules: ScheduleEntry[] = [];
  /** The lookups miss a change of the rules: rebuilt at the next lookup, once however many rules changed (loading the index puts every rule). */
  private stale = false;

  /** The devices a definition reads: its device triggers' and its conditions'. */
  static devicesOf(definition: RuleDefinition): string[] {
    return definition.nodes.flatMap((n) => (n.type === 'trigger' && n.config.resourceType === 'device' ? [n.config.deviceId] : n.type === 'condition' ? [n.config.deviceId] : []));
  }

  /** Forgets every rule (before the index is loaded again, where the reactor takes over). */
  clear(): void {
    this.rules.clear();
    this.stale = true;
  }

  put(rule: RunnableRule, revision: number): void {
    this.rules.set(rule.id, { rule, revision });
    this.stale = true;
  }

  /** A rule event in log order; one the index already has (by revision) changes nothing. */
  apply(e: RecordedEvent & RuleEvent): void {
    const current = this.rules.get(e.data.id);
    if (current && current.revision >= e.revision) return;
    switch (e.type) {
      case 'RuleCreated':
        this.put({ id: e.data.id, name: e.data.name, owner: e.data.createdBy, definition: e.data.definition }, e.revision);
        break;
      case 'RuleReplaced':
        if (current) this.put({ ...current.rule, name: e.data.name, definition: e.data.definition }, e.revision);
        break;
      case 'RuleDeleted':
        this.rules.delete(e.data.id);
        this.stale = true;
        break;
      default: {
        const _: never = e;
        return _;
      }
    }
  }

  get(id: string): RunnableRule | undefined {
    return this.rules.get(id)?.rule;
  }

  get size(): number {
    return this.rules.size;
  }

  watches(deviceId: string): boolean {
    this.derive();
    return this.watched.has(deviceId);
  }

  deviceTriggers(deviceId: string): DeviceTriggerEntry[] {
    this.derive();
    return this.byDevice.get(deviceId) ?? [];
  }

  hasGeofenceTriggers(): boolean {
    this.derive();
    return this.geofences.length > 0;
  }

  geofenceTriggers(): GeofenceTriggerEntry[] {
    this.derive();
    return this.geofences;
  }

  scheduleTriggers(): ScheduleEntry[] {
    this.derive();
    return this.schedules;
  }

  /** Rules change seldom; the lookups are rebuilt whole after a change, in one pass over every trigger. */
  private derive(): void {
    if (!this.stale) return;
    this.stale = false;
    this.byDevice = new Map();
    this.watched = new Set();
    this.geofences = [];
    this.schedules = [];
    for (const { rule } of this.rules.values()) {
      for (const id of RuleIndex.devicesOf(rule.definition)) this.watched.add(id);
      for (const node of rule.definition.nodes) {
        if (node.type !== 'trigger') continue;
        const c = node.config;
        switch (c.resourceType) {
          case 'device': {
            let entries = this.byDevice.get(c.deviceId);
            if (!entries) this.byDevice.set(c.deviceId, (entries = []));
            entries.push({ rule, nodeId: node.id, ...(c.fields ? { fields: new Set(c.fields) } : {}) });
            break;
          }
          case 'geofence':
            this.geofences.push({ rule, nodeId: node.id, geofenceId: c.geofenceId, event: c.event });
            break;
          case 'schedule':
            this.schedules.push({ rule, nodeId: node.id, cron: c.cron, ...(c.timezone ? { timezone: c.timezone } : {}) });
            break;
          case 'button':
            break;
          default: {
            const _: never = c;
            return _;
          }
        }
      }
    }
  }
}
