import type { ReactorDeps } from '../deps.js';
import type { Principal } from '../../domain/access/principal.js';
import type { Database } from '../../projections/database.js';
import { CheckpointedSubscriber, loadCheckpoint } from '../../domain/eventstore/subscriber.js';
import { readMatching } from '../../domain/eventstore/filter.js';
import { comparePositions, type RecordedEvent } from '../../domain/shared/events.js';
import { toNewEvent, type CommandContext } from '../../domain/shared/decider.js';
import { RecentMemory } from '../../domain/shared/recentMemory.js';
import { OwnerRights } from '../rights.js';
import type { LogWriter } from '../../domain/logs/writer.js';
import { isDeviceStream, type DeviceDoc, type DeviceEvent } from '../../domain/devices/device.js';
import { ruleDecider, ruleStream, type RuleEvent, type RuleState } from '../../domain/rules/rule.js';
import { MAX_RUN_DEPTH, conditionDevices, decideStart, runStream, type DeviceView, type RunEvent, type RunStarted, type RunTrigger, type RunnableRule } from '../../domain/rules/run.js';
import { causedId, derivedId } from '../../domain/shared/ids.js';
import { ChangeTracker } from '../channels/changes.js';
import { RuleIndex } from './ruleIndex.js';
import { RuleActions, type ActionIo } from './actions.js';
import { Scheduler } from './scheduler.js';
import { NO_OWNER } from './views.js';

/** The rules reactor's checkpoint; migration 0030 starts it at the end of the log of an existing installation. */
export const RULES_CHECKPOINT = 'rules';
export const RULES_ACTOR = 'system:rules';


interface Candidate {
  rule: RunnableRule;
  trigger: RunTrigger;
  event: RecordedEvent;
  /** The device documents as of the triggering event (this batch's events up to it), where the change tracker knows them; null: no such device then. */
  known: Map<string, DeviceDoc | null>;
  /** The fields the triggering event changed on its device. */
  changed: Set<string>;
  deviceId: string;
}

/** Where a run sits in a chain of runs caused by rules' own actions. */
interface Chain {
  depth: number;
  rules: string[];
}

/**
 * The side effects of rules, from the event log (checkpoint `rules`, at
 * least once):
 *
 * 1. Triggers. A device change (report or update) of a device a rule
 *    watches, and a tracker's geofence update, are matched against the
 *    rules' triggers; schedule slots come from the clock (`Scheduler`), and
 *    button presses from `POST /api/rules-v2/{id}/execute`. For each, the
 *    run is decided (conditions evaluated with the owner's rights, on their
 *    devices as of the triggering event) and
 *    stored as `RuleRunStarted` on `rulerun-<runId>`, the run id derived
 *    from the trigger, so a trigger handled again decides no second run. A
 *    device or geofence trigger whose conditions do not hold leaves no
 *    record (it would write on every report).
 * 2. Actions. Each `RuleRunStarted` that passes is carried out: every
 *    planned action without a recorded outcome is done with the owner's
 *    rights, and its outcome recorded (`RuleActionSucceeded`,
 *    `RuleActionFailed`; a batch's outcomes in one append, see
 *    `RuleActions.perform`). Effects carry ids derived from the run and the node
 *    (the command's id, the update's event id), so a repeat after a crash
 *    does nothing twice; a channel message may be sent again, with the same
 *    message id.
 *
 * Loop guard: a run caused by a rule's action (its trigger event's
 * causation leads to a run) is one deeper than that run; past
 * `MAX_RUN_DEPTH` it is halted (`RuleRunHalted`) and logged.
 */
export class RulesReactor {
  readonly subscriber: CheckpointedSubscriber<Database>;
  private readonly index = new RuleIndex();
  private readonly tracker: ChangeTracker;
  private readonly chains = new RecentMemory<string, Chain>(100_000);
  /** The owners' rights, cached until an event that may change them passes. */
  private readonly rights: OwnerRights;
  private readonly actions: RuleActions;
  readonly scheduler: Scheduler;
  private geofenceRefs: Map<string, string | null> | null = null;

  constructor(
    private readonly deps: ReactorDeps,
    io: ActionIo,
    private readonly logs: LogWriter,
    /** How long the schedule's clock waits at most before looking at the clock again (`Scheduler`'s `MAX_WAIT_MS`). */
    scheduleMaxWaitMs?: number,
  ) {
    this.tracker = new ChangeTracker(deps.store, deps.db);
    this.rights = new OwnerRights(deps.db, deps.principals, deps.projections);
    this.actions = new RuleActions(deps, io, this.rights, (eventId, chain) => this.chains.set(eventId, chain), (runId) => this.chainOf(runId), () => this.subscriber.fence);
    this.scheduler = new Scheduler(deps, this.index, (rule, nodeId, slot, missed) => this.fireSlot(rule, nodeId, slot, missed), () => this.subscriber.fence, scheduleMaxWaitMs);
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: RULES_CHECKPOINT,
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 1000,
      cluster: deps.cluster ?? null,
      handle: (batch) => this.handleBatch(batch),
      // Where this node leads `rules` (a single process always does): the index as of the checkpoint, then the clock.
      // In a cluster the clock therefore runs on one node, and a node that takes over starts from the stored state.
      leading: {
        gained: async () => {
          this.rights.clear();
          this.geofenceRefs = null;
          await this.loadIndex();
          await this.scheduler.start();
        },
        lost: () => this.scheduler.stop(),
      },
    });
  }

  async start(): Promise<void> {
    await this.subscriber.start();
  }

  async stop(): Promise<void> {
    // Actions first: a channel POST under way ends now, and its batch is handled again at the next start.
    await this.actions.stop();
    await this.subscriber.stop();
  }

  /** The rules as they were at the checkpoint: each rule stream folded up to it; later rule events come through the log. */
  private async loadIndex(): Promise<void> {
    this.index.clear();
    const at = await loadCheckpoint(this.deps.db, RULES_CHECKPOINT);
    if (!at) return;
    const ids = new Set((await this.deps.db.selectFrom('rules_v2').select('id').execute()).map((r) => r.id));
    // A rule deleted after the checkpoint is gone from the read model, yet it held for the events up to its deletion.
    for (let after = at; ; ) {
      const deleted = await readMatching(this.deps.store, { types: ['RuleDeleted'] }, { after, limit: 1000 });
      for (const e of deleted) ids.add((e.data as { id: string }).id);
      if (deleted.length < 1000) break;
      after = deleted[deleted.length - 1]!.position;
    }
    for (const id of ids) {
      let state: RuleState = ruleDecider.initialState();
      let revision = -1;
      for (const e of await this.deps.store.readStream(ruleStream(id))) {
        if (comparePositions(e.position, at) > 0) break;
        state = ruleDecider.evolve(state, e as unknown as RuleEvent);
        revision = e.revision;
      }
      if (state.status === 'active') this.index.put({ id, name: state.name, owner: state.createdBy, definition: state.definition }, revision);
    }
  }

  /** False when the batch neither changes a rule nor starts or continues a run. */
  private async handleBatch(batch: RecordedEvent[]): Promise<boolean> {
    // Devices named by rules created in this very batch are followed from their first event in it.
    const named = new Set<string>();
    for (const e of batch) if (e.type === 'RuleCreated' || e.type === 'RuleReplaced') for (const id of RuleIndex.devicesOf((e.data as { definition: RunnableRule['definition'] }).definition)) named.add(id);
    const changes = new Map((await this.tracker.changes(batch, (id) => this.index.watches(id) || named.has(id))).map((c) => [c.message.event.id, c]));
    const candidates: Candidate[] = [];
    const runs: (RecordedEvent & { data: RunStarted })[] = [];
    let indexed = false;
    // A batch that changes rights: the read models hold the change before a run is decided or an action taken.
    await this.rights.follow(batch);
    for (const e of batch) {
      if (e.type.startsWith('Geofence')) this.geofenceRefs = null;
      switch (e.type) {
        case 'RuleCreated':
        case 'RuleReplaced':
        case 'RuleDeleted':
          this.index.apply(e as RecordedEvent & RuleEvent);
          this.scheduler.changed();
          indexed = true;
          continue;
        case 'RuleRunStarted': {
          const run = (e as RecordedEvent & RunEvent & { type: 'RuleRunStarted' }).data;
          this.chains.set(run.runId, { depth: run.depth, rules: [...this.parentRules(e), run.ruleId].slice(-(MAX_RUN_DEPTH + 2)) });
          runs.push(e as RecordedEvent & { data: RunStarted });
          continue;
        }
        default:
          break;
      }
      const change = changes.get(e.id);
      if (change) {
        const fields = fieldsOf(e as RecordedEvent & DeviceEvent);
        for (const t of this.index.deviceTriggers(change.deviceId)) {
          if (t.fields && !fields.some((f) => t.fields!.has(f))) continue;
          candidates.push(this.candidate(t.rule, { type: 'device', nodeId: t.nodeId, deviceId: change.deviceId, eventId: e.id, eventType: e.type, fields }, e, change.message.iotnode, change.deviceId, change.message.diff));
        }
      }
      // A tracker's geofence update (geofence tracking writes it through the device decider).
      if (e.type === 'DeviceUpdated' && isDeviceStream(e.streamId) && this.index.hasGeofenceTriggers()) {
        const { id: trackerId, set } = (e as RecordedEvent & DeviceEvent & { type: 'DeviceUpdated' }).data;
        const update = set.assetUpdate as { assetId?: unknown; assetAccess?: unknown } | undefined;
        if (!update || typeof update.assetId !== 'string' || (update.assetAccess !== 'enter' && update.assetAccess !== 'exit')) continue;
        const refs = await this.refs();
        for (const t of this.index.geofenceTriggers()) {
          if (t.event !== update.assetAccess || refs.get(t.geofenceId) !== trackerId) continue;
          const trigger: RunTrigger = { type: 'geofence', nodeId: t.nodeId, geofenceId: t.geofenceId, trackerId, assetId: update.assetId, event: update.assetAccess, eventId: e.id };
          candidates.push(this.candidate(t.rule, trigger, e, undefined, trackerId, set));
        }
      }
    }
    if (candidates.length) await this.decide(candidates, batch[batch.length - 1]!);
    if (runs.length) await this.actions.perform(runs);
    return indexed || candidates.length > 0 || runs.length > 0;
  }

  /** `triggered`: the triggering device as its event left it; every condition's device as of the triggering event. */
  private candidate(rule: RunnableRule, trigger: RunTrigger, event: RecordedEvent, triggered: DeviceDoc | undefined, deviceId: string, diff: DeviceDoc): Candidate {
    const known = new Map<string, DeviceDoc | null>();
    if (triggered) known.set(deviceId, triggered);
    for (const id of conditionDevices(rule.definition)) {
      if (known.has(id)) continue;
      const doc = this.tracker.asOf(id, event.position);
      if (doc !== undefined) known.set(id, doc);
    }
    return { rule, trigger, event, known, changed: new Set(Object.keys(diff)), deviceId };
  }

  /** Geofence id → its tracker (`ref`), for the fences rules name. */
  private async refs(): Promise<Map<string, string | null>> {
    if (this.geofenceRefs) return this.geofenceRefs;
    const ids = this.index.geofenceTriggers().map((t) => t.geofenceId);
    const rows = ids.length ? await this.deps.db.selectFrom('geofences').select(['id', 'ref']).where('id', 'in', ids).execute() : [];
    this.geofenceRefs = new Map(rows.map((r) => [r.id, r.ref]));
    return this.geofenceRefs;
  }

  /** Decides the runs of a batch's triggers and stores them; the read models first catch up with the batch (devices, rights). */
  private async decide(candidates: Candidate[], last: RecordedEvent): Promise<void> {
    await this.deps.projections.waitFor(last.position, 30_000);
    const starts: { run: RunStarted; context: CommandContext }[] = [];
    const halts: { event: RunEvent; context: CommandContext; runId: string }[] = [];
    const at = this.deps.clock().toISOString();
    // Devices the tracker could not place in the batch (no event in it, none kept): read once, as of the batch.
    const read = new Map<string, Promise<DeviceDoc | null>>();
    const asOfBatch = (id: string) => {
      let doc = read.get(id);
      if (!doc) read.set(id, (doc = this.tracker.readAsOf(id, last.position)));
      return doc;
    };
    for (const c of candidates) {
      const runId = causedId(c.event.id, ['trigger', c.event.id, c.rule.id, c.trigger.nodeId]);
      const context: CommandContext = { actor: RULES_ACTOR, correlationId: c.event.metadata.correlationId, causationId: c.event.id, now: at };
      const parent = await this.causedBy(c.event);
      const depth = parent ? parent.depth + 1 : 0;
      if (depth > MAX_RUN_DEPTH) {
        const chain = [...parent!.rules, c.rule.id];
        const reason = `it would be run ${depth + 1} in a chain of runs each caused by a rule's own action (rules ${chain.slice(-4).join(' → ')}); a chain stops after ${MAX_RUN_DEPTH + 1} runs. Change the rule so that its actions do not trigger it again`;
        halts.push({ runId, context, event: { type: 'RuleRunHalted', data: { runId, ruleId: c.rule.id, trigger: c.trigger, depth, chain, reason, at } } });
        continue;
      }
      const owner = await this.deps.principals.get(c.rule.owner);
      const views = await this.views(owner, [...(c.trigger.type === 'geofence' ? [] : [c.deviceId]), ...conditionDevices(c.rule.definition)], c.known, asOfBatch);
      const why = !owner ? NO_OWNER : c.trigger.type === 'geofence' ? await this.geofenceRefusal(owner, c.trigger.geofenceId, c.trigger.assetId) : (views.get(c.deviceId) as { why?: string }).why;
      if (why) {
        // The owner lost the right to read what triggers the rule: nothing runs, and the rule's log says so, at most a few times a minute.
        this.logs.write({ resourceId: c.rule.id, resourceType: 'ruleV2', type: 'warning', priority: 'high', category: 'access', message: `Not run: ${why}` }, `rule not run ${c.deviceId}`);
        continue;
      }
      const run = decideStart(c.rule, c.trigger, runId, depth, at, {
        device: (id) => views.get(id) ?? { doc: null, why: `iotnode ${id} does not exist` },
        changed: (id, field) => id === c.deviceId && c.changed.has(field),
      });
      if (run.actions.length) starts.push({ run, context });
    }
    await this.append(starts.map((s) => ({ streamId: runStream(s.run.runId), event: toNewEvent({ type: 'RuleRunStarted', data: s.run }, s.context, s.run.runId) })));
    await this.append(halts.map((h) => ({ streamId: runStream(h.runId), event: toNewEvent(h.event, h.context, h.runId) })));
  }

  /** Appends each event to its own new stream, in one round trip where the store can; events already stored (a repeat) are left as they are. */
  private async append(items: { streamId: string; event: ReturnType<typeof toNewEvent> }[]): Promise<void> {
    if (items.length === 0) return;
    const { store } = this.deps;
    if (store.appendMany && items.length > 1) {
      try {
        await store.appendMany(items.map((i) => ({ streamId: i.streamId, events: [i.event] })));
        return;
      } catch {
        // Some were stored before (a batch handled again): one by one, where a repeat is a no-op.
      }
    }
    for (const i of items) await store.append(i.streamId, [i.event], 'any');
  }

  /** The chain a trigger event continues: the run whose action wrote it (or wrote what it reacts to); null for an event no rule caused. */
  private async causedBy(event: RecordedEvent): Promise<Chain | null> {
    const cause = event.metadata.causationId;
    if (!cause) return null;
    const known = this.chains.get(cause);
    if (known) return known;
    // An action's event carries its run as causation; a run stored before this process started is read back.
    if (!event.metadata.actor.startsWith('rule:')) return null;
    return this.chainOf(cause);
  }

  private async chainOf(runId: string): Promise<Chain | null> {
    const known = this.chains.get(runId);
    if (known) return known;
    const [first] = await this.deps.store.readStream(runStream(runId), { limit: 1 });
    if (first?.type !== 'RuleRunStarted') return null;
    const run = first.data as RunStarted;
    const chain = { depth: run.depth, rules: [run.ruleId] };
    this.chains.set(runId, chain);
    return chain;
  }

  private parentRules(e: RecordedEvent): string[] {
    const cause = e.metadata.causationId;
    return (cause && this.chains.get(cause)?.rules) || [];
  }

  /**
   * Devices as the owner sees them: documents as of the trigger where known, else from `read` (as of the batch), else
   * (a schedule slot) from the read model now; rights cached until an access event passes.
   */
  private async views(owner: Principal | null, ids: readonly string[], known: Map<string, DeviceDoc | null>, read?: (id: string) => Promise<DeviceDoc | null>): Promise<Map<string, DeviceView>> {
    const views = new Map<string, DeviceView>();
    if (!owner) {
      for (const id of ids) views.set(id, { doc: null, why: NO_OWNER });
      return views;
    }
    const missing: string[] = [];
    for (const id of new Set(ids)) {
      if (!(await this.rights.may(owner, id, 'read'))) {
        views.set(id, { doc: null, why: `the rule's owner cannot read iotnode ${id}` });
        continue;
      }
      const doc = known.has(id) ? known.get(id)! : read ? await read(id) : undefined;
      if (doc === undefined) missing.push(id);
      else views.set(id, doc ? { doc } : { doc: null, why: `iotnode ${id} does not exist` });
    }
    if (missing.length) {
      const rows = await this.deps.db.selectFrom('devices').select(['id', 'doc']).where('id', 'in', missing).execute();
      const docs = new Map(rows.map((r) => [r.id, r.doc as DeviceDoc]));
      for (const id of missing) views.set(id, docs.has(id) ? { doc: docs.get(id)! } : { doc: null, why: `iotnode ${id} does not exist` });
    }
    return views;
  }

  /** Why a geofence trigger does not run for the owner: the fence, and the asset that crossed it, must both be readable. */
  private async geofenceRefusal(owner: Principal, geofenceId: string, assetId: string): Promise<string | null> {
    if (!(await this.rights.may(owner, geofenceId, 'read'))) return `the rule's owner cannot read geofence ${geofenceId}`;
    if (!(await this.rights.may(owner, assetId, 'read'))) return `the rule's owner cannot read iotnode ${assetId}, the asset that crossed geofence ${geofenceId}`;
    return null;
  }

  /** A schedule slot: the run decided from the clock and stored with an id derived from the slot, so it happens once. */
  private async fireSlot(rule: RunnableRule, nodeId: string, slot: Date, missed: number): Promise<void> {
    const runId = derivedId('schedule', rule.id, nodeId, slot.toISOString());
    const at = this.deps.clock().toISOString();
    const context: CommandContext = { actor: RULES_ACTOR, correlationId: `schedule:${rule.id}/${nodeId}/${slot.toISOString()}`, now: at };
    const owner = await this.deps.principals.get(rule.owner);
    const views = await this.views(owner, conditionDevices(rule.definition), new Map());
    const run = decideStart(rule, { type: 'schedule', nodeId, slot: slot.toISOString() }, runId, 0, at, {
      device: (id) => views.get(id) ?? { doc: null, why: `iotnode ${id} does not exist` },
      changed: () => false,
    }, missed);
    // Only the node that leads `rules` keeps the clock; a node that lost the lead unnoticed stores nothing.
    await this.subscriber.fence.check();
    await this.deps.store.append(runStream(runId), [toNewEvent({ type: 'RuleRunStarted', data: run }, context, runId)], 'any');
  }
}

/** The top-level fields a device event carries: a report's payload keys (or its sub-topic), an update's set and removed keys. */
function fieldsOf(e: RecordedEvent & DeviceEvent): string[] {
  switch (e.type) {
    case 'DeviceReported':
      return e.data.path.length ? [e.data.path[0]!] : Object.keys(e.data.payload);
    case 'DeviceUpdated':
      return [...Object.keys(e.data.set), ...e.data.unset];
    case 'DeviceRegistered':
      return Object.keys(e.data.doc);
    default:
      return [];
  }
}

