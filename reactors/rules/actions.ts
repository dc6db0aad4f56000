import type { ReactorDeps } from '../deps.js';
import type { Principal } from '../../domain/access/principal.js';
import { scopesHeld } from '../../projections/access.js';
import type { DeviceCommandInput, SentCommand } from '../../domain/commands/command.js';
import type { NewEvent, RecordedEvent } from '../../domain/shared/events.js';
import type { Fence } from '../../domain/eventstore/leases.js';
import { handle, toNewEvent, type CommandContext } from '../../domain/shared/decider.js';
import { ConflictError, ForbiddenError, NotFoundError, PlatformError } from '../../domain/shared/errors.js';
import { satisfies, type Need } from '../../domain/access/scopes.js';
import { PROTECTED_FROM_REPORTS, deviceDecider, deviceStream } from '../../domain/devices/device.js';
import { ruleActor } from '../../domain/rules/rule.js';
import { outcomeId, pendingActions, runDecider, runStream, type PlannedAction, type RunEvent, type RunStarted, type RunState } from '../../domain/rules/run.js';
import { causedId, derivedResourceId } from '../../domain/shared/ids.js';
import { NO_OWNER } from './views.js';
import { channelHeaders, postOnce, sleep } from '../channels/http.js';
import { StoppingError } from '../../domain/eventstore/subscriber.js';
import type { OwnerRights } from '../rights.js';

/** What actions reach outside the event store with. */
export interface ActionIo {
  /** The device command path `PUT /api/iotnodes/command` takes. */
  send(principal: Principal, input: DeviceCommandInput, context: CommandContext, id: string): Promise<SentCommand>;
  /** A publish on the platform's broker (an `mqtt` channel's output topic). */
  publish(topic: string, payload: Buffer): Promise<void>;
}

/**
 * Retry policy of a channel action over `http`: 3 attempts, 250 ms then
 * 500 ms apart, each waiting at most 5 s. The rule's other runs wait
 * meanwhile, so it is kept short; a message that finally fails is a failed
 * action in the rule's log.
 */
export const CHANNEL_ACTION_RETRY = { attempts: 3, firstDelayMs: 250, timeoutMs: 5000 };

/** Runs of different rules are carried out side by side, this many at a time; one rule's runs in order. */
const PARALLEL_RULES = 8;

type Outcome = { ok: true; detail: string; commandId?: string; eventId?: string; log?: { message: string; type: 'error' | 'warning' | 'info' | 'verbose' | 'debug'; priority: 'severe' | 'high' | 'medium' | 'low' } } | { ok: false; reason: string };

/** The message an action sends through a channel. */
export function channelMessage(run: RunStarted, nodeId: string, text: string | undefined) {
  return {
    id: causedId(run.runId, ['channel', run.runId, nodeId]),
    rule: { _id: run.ruleId, name: run.ruleName },
    runId: run.runId,
    nodeId,
    ...(text !== undefined ? { message: text } : {}),
    trigger: run.trigger,
    conditions: run.conditions,
    time: run.at,
  };
}

/** The outbound topic of a rule's messages for an `mqtt` channel's recipient. */
export const ruleTopic = (recipient: string, ruleId: string) => `svc/output/v2/${recipient}/rule/${ruleId}`;

/**
 * Carries out runs: each planned action without a recorded outcome, with the
 * owner's rights (object and role checks as a request by the owner would
 * pass), then its outcome recorded on the run's stream.
 */
export class RuleActions {
  private readonly stopping = new AbortController();

  constructor(
    private readonly deps: ReactorDeps,
    private readonly io: ActionIo,
    /** The owners' rights: the role check of an action is the REST API's. */
    private readonly rights: OwnerRights,
    private readonly remember: (eventId: string, chain: { depth: number; rules: string[] }) => void,
    private readonly chainOf: (runId: string) => Promise<{ depth: number; rules: string[] } | null>,
    /** Proves this node still leads the rules reactor (always, in a single process). */
    private readonly fence: () => Fence,
  ) {}

  async stop(): Promise<void> {
    this.stopping.abort();
  }

  /**
   * Carries out a batch's runs and records their outcomes. The runs' streams
   * are read in one round trip (outcomes recorded before, by a batch handled
   * again after a crash, are not done again), and every outcome of the batch
   * is stored in one multi-stream append once its actions are done: all of
   * them or none. Each outcome's event id is derived from its run and node,
   * so an outcome can be stored only once whatever writes it, and a batch
   * handled again after a crash between the actions and that append does the
   * actions again (their effects carry ids of their own, so nothing is done
   * twice) and stores what is missing.
   */
  async perform(runs: (RecordedEvent & { data: RunStarted })[]): Promise<void> {
    const states = await this.states(runs.map((e) => e.data.runId));
    const outcomes = new Map<string, NewEvent[]>();
    const byRule = new Map<string, (RecordedEvent & { data: RunStarted })[]>();
    for (const e of runs) byRule.set(e.data.ruleId, [...(byRule.get(e.data.ruleId) ?? []), e]);
    const queue = [...byRule.values()];
    const work = async () => {
      for (let group = queue.shift(); group; group = queue.shift()) for (const e of group) await this.carryOut(e, states.get(e.data.runId) ?? runDecider.initialState(), outcomes);
    };
    await Promise.all(Array.from({ length: Math.min(PARALLEL_RULES, queue.length) }, work));
    await this.record(outcomes);
  }

  /** Each run's state as stored. */
  private async states(runIds: string[]): Promise<Map<string, RunState>> {
    const streams = [...new Set(runIds)].map(runStream);
    const { store } = this.deps;
    const events = store.readStreams ? await store.readStreams(streams) : (await Promise.all(streams.map((s) => store.readStream(s)))).flat();
    const states = new Map<string, RunState>();
    for (const x of events) {
      const runId = (x.data as { runId: string }).runId;
      states.set(runId, runDecider.evolve(states.get(runId) ?? runDecider.initialState(), x as unknown as RunEvent));
    }
    return states;
  }

  /**
   * The batch's outcomes, in one append where the store can. Should that fail
   * (some were stored already, by a batch handled before a crash), event by
   * event, where a repeat of a stored event is a no-op and any other failure
   * is the store's own.
   */
  private async record(outcomes: Map<string, NewEvent[]>): Promise<void> {
    if (outcomes.size === 0) return;
    const { store } = this.deps;
    if (store.appendMany) {
      const stored = await store.appendMany([...outcomes].map(([streamId, events]) => ({ streamId, events }))).then(
        () => true,
        () => false,
      );
      if (stored) return;
    }
    for (const [streamId, events] of outcomes) for (const event of events) await store.append(streamId, [event], 'any');
  }

  private async carryOut(e: RecordedEvent & { data: RunStarted }, stored: RunState, outcomes: Map<string, NewEvent[]>): Promise<void> {
    const run = e.data;
    let state = stored;
    if (run.actions.length === 0 || pendingActions(state).length === 0) return;
    const owner = await this.deps.principals.get(run.owner);
    const chain = (await this.chainOf(run.runId)) ?? { depth: run.depth, rules: [run.ruleId] };
    for (const action of pendingActions(state)) {
      const at = this.deps.clock().toISOString();
      const effect: CommandContext = { actor: ruleActor(run.ruleId), correlationId: e.metadata.correlationId, causationId: run.runId, now: at };
      let outcome: Outcome;
      // Before each side effect, and outside the try: a lost lead is not an action's failure; the new leader carries it out.
      await this.fence().check();
      try {
        outcome = owner ? await this.act(run, action, owner, effect, chain) : { ok: false, reason: NO_OWNER };
      } catch (error) {
        // Stopping is not the action's failure: the batch is handled again at the next start.
        if (error instanceof StoppingError) throw error;
        outcome = { ok: false, reason: reasonOf(error) };
        if (!(error instanceof PlatformError)) this.deps.log.error({ err: error, runId: run.runId, nodeId: action.nodeId }, 'a rule action failed unexpectedly');
      }
      const base = { runId: run.runId, ruleId: run.ruleId, nodeId: action.nodeId, action: action.config.action, at };
      const event: Extract<RunEvent, { type: 'RuleActionSucceeded' | 'RuleActionFailed' }> = outcome.ok
        ? { type: 'RuleActionSucceeded', data: { ...base, detail: outcome.detail, ...(outcome.commandId ? { commandId: outcome.commandId } : {}), ...(outcome.eventId ? { eventId: outcome.eventId } : {}), ...(outcome.log ? { log: outcome.log } : {}) } }
        : { type: 'RuleActionFailed', data: { ...base, reason: outcome.reason.slice(0, 2000) } };
      const context: CommandContext = { actor: 'system:rules', correlationId: e.metadata.correlationId, causationId: run.runId, now: at };
      for (const decided of runDecider.decide({ type: 'RecordOutcome', event }, state)) {
        state = runDecider.evolve(state, decided);
        const streamId = runStream(run.runId);
        outcomes.set(streamId, [...(outcomes.get(streamId) ?? []), toNewEvent(decided, context, outcomeId(run.runId, action.nodeId))]);
      }
    }
  }

  private async act(run: RunStarted, action: PlannedAction, owner: Principal, context: CommandContext, chain: { depth: number; rules: string[] }): Promise<Outcome> {
    const config = action.config;
    switch (config.action) {
      case 'log':
        return { ok: true, detail: 'logged', log: { message: config.message, type: config.type ?? 'info', priority: config.priority ?? 'low' } };
      case 'command': {
        if (!(await this.rights.roleAllows(owner, 'device', 'PUT'))) return { ok: false, reason: "the rule's owner has no role that may send commands (PUT on device)" };
        const id = derivedResourceId('rule', run.runId, action.nodeId);
        try {
          const sent = await this.io.send(owner, { command: config.command, iotnodeId: config.iotnodeId, ...(config.integrationName ? { integrationName: config.integrationName } : {}), ...(config.data ? { data: config.data } : {}) }, context, id);
          return { ok: true, detail: `command ${config.command} requested for iotnode ${config.iotnodeId} through ${sent.integration} (command ${id})`, commandId: id };
        } catch (error) {
          if (error instanceof ConflictError) return { ok: true, detail: `command ${config.command} requested for iotnode ${config.iotnodeId} (command ${id})`, commandId: id };
          if (error instanceof NotFoundError) return { ok: false, reason: `the rule's owner cannot read iotnode ${config.iotnodeId}, or it no longer exists` };
          if (error instanceof ForbiddenError) return { ok: false, reason: `the rule's owner may not change iotnode ${config.iotnodeId}` };
          throw error;
        }
      }
      case 'setField': {
        if (PROTECTED_FROM_REPORTS.has(config.field)) return { ok: false, reason: `${config.field} is not set by rules` };
        if (!(await this.rights.roleAllows(owner, 'device', 'PUT'))) return { ok: false, reason: "the rule's owner has no role that may change devices (PUT on device)" };
        const denied = await this.denied(owner, config.iotnodeId, 'write', 'iotnode');
        if (denied) return { ok: false, reason: denied };
        const eventId = causedId(run.runId, ['setField', run.runId, action.nodeId]);
        // Known before the update is stored, so a geofence crossing it causes is traced back to this run.
        this.remember(eventId, chain);
        try {
          const handled = await handle(this.deps.store, deviceStream(config.iotnodeId), deviceDecider, { type: 'UpdateDevice', id: config.iotnodeId, fields: { [config.field]: config.value }, at: context.now }, context, { retries: 5, eventIds: [eventId] });
          return handled.events.length
            ? { ok: true, detail: `${config.field} of iotnode ${config.iotnodeId} set to ${short(config.value)}`, eventId }
            : { ok: true, detail: `${config.field} of iotnode ${config.iotnodeId} already was ${short(config.value)}` };
        } catch (error) {
          if (error instanceof NotFoundError) return { ok: false, reason: `iotnode ${config.iotnodeId} no longer exists` };
          throw error;
        }
      }
      case 'channel': {
        const denied = await this.denied(owner, config.channelId, 'write', 'channel');
        if (denied) return { ok: false, reason: denied };
        const channel = await this.deps.db.selectFrom('channels').select(['doc', 'secrets', 'protocol']).where('id', '=', config.channelId).executeTakeFirst();
        if (!channel) return { ok: false, reason: `channel ${config.channelId} no longer exists` };
        const message = channelMessage(run, action.nodeId, config.message);
        const body = JSON.stringify(message);
        if (channel.protocol === 'mqtt') {
          const recipient = (channel.doc.mqtt as { recipient?: string } | undefined)?.recipient;
          if (!recipient) return { ok: false, reason: `channel ${config.channelId} has no MQTT recipient` };
          await this.io.publish(ruleTopic(recipient, run.ruleId), Buffer.from(body));
          return { ok: true, detail: `message published to ${recipient} through channel ${config.channelId}` };
        }
        if (channel.protocol === 'http') {
          const http = channel.doc.http as { url: string };
          // An action whose outcome a crash kept from being stored is done again: the receiver drops the repeat by its id.
          const why = await this.post(http.url, channelHeaders(channel, message.id), body);
          let origin = http.url;
          try {
            origin = new URL(http.url).origin;
          } catch {
            // the URL as given
          }
          return why === null ? { ok: true, detail: `message posted to ${origin} through channel ${config.channelId}` } : { ok: false, reason: `channel ${config.channelId}: delivery to ${origin} failed (${why})` };
        }
        return { ok: false, reason: `channel ${config.channelId}: delivery over ${channel.protocol} is not supported in this build` };
      }
      default: {
        const _: never = config;
        return _;
      }
    }
  }

  private async denied(owner: Principal, id: string, need: Need, kind: string): Promise<string | null> {
    const held = await scopesHeld(this.deps.db, owner, id);
    if (!satisfies(held, 'read')) return `the rule's owner cannot read ${kind} ${id}, or it no longer exists`;
    if (!satisfies(held, need)) return `the rule's owner may not change ${kind} ${id}`;
    return null;
  }

  /**
   * POSTs a message; null once delivered, otherwise why not. Stopping cuts the attempts short and leaves the batch
   * to be handled again (`StoppingError`) rather than record a failure the receiver did not cause.
   */
  private async post(url: string, headers: Record<string, string>, body: string): Promise<string | null> {
    const { signal } = this.stopping;
    let why = '';
    for (let attempt = 1; attempt <= CHANNEL_ACTION_RETRY.attempts; attempt++) {
      const result = await postOnce(this.deps.outbound, url, headers, body, CHANNEL_ACTION_RETRY.timeoutMs, signal);
      if (result.ok) return null;
      if (signal.aborted) throw new StoppingError('the rules reactor');
      why = result.why;
      if (result.final) break;
      if (attempt < CHANNEL_ACTION_RETRY.attempts) await sleep(CHANNEL_ACTION_RETRY.firstDelayMs * 2 ** (attempt - 1), signal);
    }
    return why;
  }
}

const short = (v: unknown): string => {
  const text = JSON.stringify(v) ?? 'null';
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
};

const reasonOf = (error: unknown): string => (error instanceof PlatformError ? error.message.replace(/^ERR - /, '') : 'an internal error (see the platform log)');
