import type { Kysely } from 'kysely';
import type { Fetch } from '../outbound.js';
import type { Logger } from 'pino';
import type { EventStore } from '../../domain/eventstore/port.js';
import { CheckpointedSubscriber, type SubscriberCluster } from '../../domain/eventstore/subscriber.js';
import { LeaseLostError } from '../../domain/eventstore/leases.js';
import type { Position, RecordedEvent } from '../../domain/shared/events.js';
import { handle, type CommandContext } from '../../domain/shared/decider.js';
import { commandDecider, commandStream, type CommandEvent, type CommandRequest, type CommandState } from '../../domain/commands/command.js';
import { connectorDecider, connectorStream } from '../../domain/connectors/connector.js';
import type { LogWriter } from '../../domain/logs/writer.js';
import type { Database } from '../../projections/database.js';
import type { Registry } from '../../ingest/registry.js';
import { INTEGRATION_MODULES } from '../integrations/index.js';
import { Unreachable, type DownlinkContext, type Outcome } from '../integrations/types.js';

/** The checkpoint of command delivery; migration 0010 starts it at the end of the log of an existing installation. */
export const COMMANDS_CHECKPOINT = 'commands';

/**
 * Retry policy: a command whose network server cannot be reached is tried
 * again after 1 s, 5 s, 15 s, 1 min, then every 5 min, for at most a day;
 * each HTTP call to a network server waits at most 5 s. A read (`getDownlinks`)
 * is not retried: its answer is only worth something now.
 */
export const COMMAND_RETRY: CommandRetry = { delaysMs: [1_000, 5_000, 15_000, 60_000, 300_000], giveUpAfterMs: 24 * 3600_000, callTimeoutMs: 5_000, parallel: 8 };

export interface CommandRetry {
  /** The wait before each next attempt, by attempt; the last repeats. */
  delaysMs: number[];
  giveUpAfterMs: number;
  /** How long one call to a network server or broker waits. */
  callTimeoutMs: number;
  /** Commands tried at a time. */
  parallel: number;
}

const ACTOR = 'system:commands';

interface Open {
  request: CommandRequest;
  context: CommandContext;
  attempt: number;
  maybeDone: boolean;
}

/**
 * Delivers commands from their stored events. For each `CommandRequested`
 * it calls the integration's downlink adapter (the network server's API, a
 * broker) and records what came of it as an event on the command's stream:
 * `CommandAccepted`, `CommandRefused`, or `CommandAttemptFailed` with the
 * time of the next attempt. The request is stored before anything leaves, so
 * a crash loses nothing: after a restart the reactor resumes from its
 * checkpoint. A command that may already have reached the network server (a
 * time-out after sending, or a restart before its outcome was recorded) is
 * first looked for in the device's queue there, so a retry never queues it
 * twice; a batch handled again leaves the commands it settled before. An
 * accepted flush marks the device's queued downlinks flushed.
 */
export class CommandDelivery {
  /** Its follower of the event log (its lag is measured from it). */
  readonly subscriber: CheckpointedSubscriber<Database>;
  private readonly timers = new Map<string, NodeJS.Timeout>();
  /** Commands whose retry is under way (its timer fired): no second timer is set for them meanwhile. */
  private readonly retrying = new Set<string>();
  /** Commands this process handed to a network server or broker whose outcome is not recorded yet. */
  private readonly sent = new Set<string>();
  /** When this node started delivering (took the lead, in a cluster): a command requested before may have been under way elsewhere. */
  private startedAt = Date.now();
  private stopped = false;

  constructor(
    private readonly deps: { store: EventStore; db: Kysely<Database>; log: Logger; registry: Registry; logs: LogWriter; projections: { waitFor(position: Position, timeoutMs: number): Promise<void> }; clock?: () => Date; cluster?: SubscriberCluster | null; outbound: Fetch },
    private readonly publish: DownlinkContext['publish'],
    private readonly retry: CommandRetry = COMMAND_RETRY,
    /**
     * What downlinks leave through that must live where delivery leads: the connections to external brokers. In a
     * cluster they start and stop with this reactor's lead, so the node that sends a command holds its connection.
     */
    private readonly links: { start(): Promise<void>; stop(): Promise<void> } | null = null,
  ) {
    this.subscriber = new CheckpointedSubscriber<Database>({
      name: COMMANDS_CHECKPOINT,
      store: deps.store,
      db: deps.db,
      log: deps.log,
      batchSize: 500,
      cluster: deps.cluster ?? null,
      handle: (batch) => this.handleBatch(batch),
      leading: {
        gained: async () => {
          this.stopped = false;
          this.startedAt = Date.now();
          await this.links?.start();
          await this.resumeRetries();
        },
        lost: async () => {
          this.stopped = true;
          for (const t of this.timers.values()) clearTimeout(t);
          this.timers.clear();
          await this.links?.stop();
        },
      },
    });
  }

  private now(): Date {
    return this.deps.clock?.() ?? new Date();
  }

  /** Resumes the retries that were waiting, then follows the log (in a cluster: wherever this node leads). */
  async start(): Promise<void> {
    await this.subscriber.start();
  }

  async stop(): Promise<void> {
    await this.subscriber.stop();
  }

  /** False when the batch holds no command to deliver or settle. */
  private async handleBatch(batch: RecordedEvent[]): Promise<boolean> {
    const work: Open[] = [];
    let accepted = false;
    for (const e of batch as (RecordedEvent & CommandEvent)[]) {
      if (e.type === 'CommandRequested') {
        // A batch handled again (its checkpoint not saved: a database that failed after the downlink left, a lead
        // taken over) finds its commands settled, or tried already: never sent blindly a second time.
        const { state, retryAt } = await this.stateOf(e.data.id);
        if (state.status !== 'requested' && state.status !== 'pending') continue;
        const context = { actor: ACTOR, correlationId: e.metadata.correlationId, causationId: e.id, now: '' };
        // Requested before this node started delivering, tried before, or sent by this process without an outcome
        // recorded: an attempt may have reached the network server, which is asked first.
        const maybeDone = Date.parse(e.metadata.time) < this.startedAt || state.attempts > 0 || this.sent.has(e.data.id);
        const open = { request: e.data, context, attempt: state.attempts + 1, maybeDone };
        // Waiting for a retry: one timer per command makes it, whoever scheduled it first.
        if (state.status === 'pending') this.schedule(open, (retryAt ?? 0) - this.now().getTime());
        else work.push(open);
      } else if (e.type === 'CommandAccepted') {
        await this.afterAccepted(e);
        accepted = true;
      } else if (e.type === 'CommandAttemptFailed' && e.data.retryAt && !this.timers.has(e.data.id) && !this.retrying.has(e.data.id)) {
        // A retry asked for by an attempt this node did not see through (another node that led and died before its
        // read models showed the command waiting, so `resumeRetries` missed it): its timer, from the stored stream.
        await this.resume(e.data.id);
      }
    }
    // Several commands at a time; the checkpoint moves once each has an outcome recorded. Every attempt of a group
    // ends before the batch fails, so a batch handled again never races an attempt still under way.
    for (let i = 0; i < work.length; i += this.retry.parallel) {
      const outcomes = await Promise.allSettled(work.slice(i, i + this.retry.parallel).map((w) => this.attempt(w)));
      const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
      if (failed) throw failed.reason;
    }
    return accepted || work.length > 0;
  }

  /** One attempt at one command, and its outcome recorded. */
  private async attempt(open: Open): Promise<void> {
    const { request } = open;
    const connector = this.deps.registry.connector(request.connectorId);
    const module = INTEGRATION_MODULES[request.integration];
    let outcome: Outcome;
    let failure: Unreachable | null = null;
    // Only the node that leads delivers: checked before each call to a network server or broker.
    await this.subscriber.fence.check();
    if (!connector) outcome = { type: 'refused', message: 'the connector no longer exists' };
    else if (!module?.downlink) outcome = { type: 'refused', message: `the ${request.integration} integration takes no commands in this build` };
    else {
      try {
        this.sent.add(request.id);
        outcome = await module.downlink.execute(request, connector, { attempt: open.attempt, maybeDone: open.maybeDone, timeoutMs: this.retry.callTimeoutMs, http: this.deps.outbound, publish: this.publish });
      } catch (err) {
        failure = err instanceof Unreachable ? err : new Unreachable(`the ${request.integration} adapter failed: ${(err as Error).message}`, true);
        if (!(err instanceof Unreachable)) this.deps.log.error({ err, commandId: request.id }, 'a command adapter failed');
        outcome = { type: 'refused', message: failure.message };
      }
    }
    const at = this.now().toISOString();
    const context = { ...open.context, now: at };
    if (failure) {
      const age = this.now().getTime() - Date.parse(request.at);
      const final = request.kind === 'read' || age >= this.retry.giveUpAfterMs;
      const delay = this.retry.delaysMs[Math.min(open.attempt - 1, this.retry.delaysMs.length - 1)]!;
      const retryAt = final ? null : new Date(this.now().getTime() + delay).toISOString();
      await this.record(request.id, { type: 'CommandAttemptFailed', data: { id: request.id, attempt: open.attempt, message: failure.message, retryAt, at } }, context);
      this.connectorLog(request, 'warning', `Command ${request.command} (${request.id}) for ${request.deviceId ? `iotnode ${request.deviceId}` : 'the connector'}: attempt ${open.attempt} failed: ${failure.message}${retryAt ? `; next attempt at ${retryAt}` : '; given up'}`);
      await this.health(request.connectorId, 'failing', failure.message, at, context);
      if (retryAt) this.schedule({ ...open, attempt: open.attempt + 1, maybeDone: open.maybeDone || failure.maybeDone }, Date.parse(retryAt) - this.now().getTime());
      return;
    }
    if (outcome.type === 'accepted') {
      if (outcome.networkItemId && Buffer.byteLength(outcome.networkItemId) > 256) {
        // An id is an indexed key of the commands read model; no network server's is this long. Kept out, and said.
        this.connectorLog(request, 'warning', `Command ${request.command} (${request.id}): the network server's queue item id is longer than 256 bytes and is not kept; its delivery reports cannot be matched to the command`);
        outcome = { ...outcome, networkItemId: undefined };
      }
      await this.record(request.id, { type: 'CommandAccepted', data: { id: request.id, ...(outcome.networkItemId ? { networkItemId: outcome.networkItemId } : {}), ...(outcome.items ? { items: outcome.items } : {}), at } }, context);
      if (connector) await this.health(request.connectorId, 'ok', undefined, at, context);
      return;
    }
    await this.record(request.id, { type: 'CommandRefused', data: { id: request.id, ...(outcome.status ? { status: outcome.status } : {}), message: outcome.message, at } }, context);
    this.connectorLog(request, 'error', `Command ${request.command} (${request.id}) for ${request.deviceId ? `iotnode ${request.deviceId}` : 'the connector'} refused: ${outcome.message}`);
    // A server that refuses our credentials is as good as unreachable for every later command.
    if (outcome.status === 401 || outcome.status === 403) await this.health(request.connectorId, 'failing', outcome.message, at, context);
    else if (connector) await this.health(request.connectorId, 'ok', undefined, at, context);
  }

  private async record(id: string, event: Exclude<CommandEvent, { type: 'CommandRequested' }>, context: CommandContext): Promise<void> {
    await handle(this.deps.store, commandStream(id), commandDecider, { type: 'RecordOutcome', event }, context, { retries: 5 });
    this.sent.delete(id);
  }

  /** A command's state from its stream, when its last failed attempt asked for the next, and the stored request. */
  private async stateOf(id: string): Promise<{ state: CommandState; retryAt: number | null; requested: (RecordedEvent & CommandEvent) | undefined }> {
    const events = (await this.deps.store.readStream(commandStream(id))) as unknown as (RecordedEvent & CommandEvent)[];
    let state = commandDecider.initialState();
    let retryAt: number | null = null;
    for (const e of events) {
      state = commandDecider.evolve(state, e);
      if (e.type === 'CommandAttemptFailed') retryAt = e.data.retryAt ? Date.parse(e.data.retryAt) : null;
    }
    return { state, retryAt, requested: events[0] };
  }

  private async health(connectorId: string, status: 'ok' | 'failing', error: string | undefined, at: string, context: CommandContext): Promise<void> {
    try {
      await handle(this.deps.store, connectorStream(connectorId), connectorDecider, { type: 'ReportStatus', id: connectorId, status, ...(error ? { error } : {}), at }, context, { retries: 5 });
    } catch (err) {
      // A deleted connector has no health to keep.
      this.deps.log.debug({ err, connectorId }, 'connector status not recorded');
    }
  }

  private connectorLog(request: CommandRequest, type: 'warning' | 'error', message: string): void {
    this.deps.logs.write({ resourceId: request.connectorId, resourceType: 'connector', type, priority: type === 'error' ? 'high' : 'medium', category: 'command', message: message.slice(0, 2000), data: { commandId: request.id } }, `command ${type}`);
  }

  private schedule(open: Open, inMs: number): void {
    if (this.stopped) return;
    clearTimeout(this.timers.get(open.request.id));
    const timer = setTimeout(() => {
      this.timers.delete(open.request.id);
      void this.retryNow(open);
    }, Math.max(0, inMs));
    timer.unref();
    this.timers.set(open.request.id, timer);
  }

  /** A retry, if the command still waits for one (another node, or a late outcome, may have settled it). */
  private async retryNow(open: Open): Promise<void> {
    const id = open.request.id;
    this.retrying.add(id);
    try {
      const { state } = await this.stateOf(id);
      if (state.status !== 'pending') return;
      await this.attempt(open);
    } catch (err) {
      if (err instanceof LeaseLostError) return;
      this.deps.log.error({ err, commandId: id }, 'retrying a command failed; trying again later');
      // The attempt may have reached the network server before its outcome failed to be recorded: look there first.
      this.schedule({ ...open, maybeDone: true }, this.retry.delaysMs[Math.min(open.attempt - 1, this.retry.delaysMs.length - 1)]!);
    } finally {
      this.retrying.delete(id);
    }
  }

  /** At start: the commands waiting for a retry get their timers back. */
  private async resumeRetries(): Promise<void> {
    const rows = await this.deps.db.selectFrom('commands').select('id').where('status', '=', 'pending').execute();
    for (const row of rows) await this.resume(row.id);
  }

  /** A command that waits for a retry, from its stream: its timer, at the time its last failed attempt asked for. */
  private async resume(id: string): Promise<void> {
    const { state, retryAt, requested } = await this.stateOf(id);
    if (state.status !== 'pending' || requested?.type !== 'CommandRequested') return;
    const context = { actor: ACTOR, correlationId: requested.metadata.correlationId, causationId: requested.id, now: '' };
    this.schedule({ request: requested.data, context, attempt: state.attempts + 1, maybeDone: true }, (retryAt ?? 0) - this.now().getTime());
  }

  /** An accepted flush: the downlinks queued for the device before it are flushed. */
  private async afterAccepted(e: RecordedEvent & CommandEvent & { type: 'CommandAccepted' }): Promise<void> {
    // The read models must hold every outcome before this one.
    await this.deps.projections.waitFor(e.position, 30_000);
    const flush = await this.deps.db.selectFrom('commands').select(['kind', 'device_id', 'connector_id', 'requested_at']).where('id', '=', e.data.id).executeTakeFirst();
    if (flush?.kind !== 'flush' || !flush.device_id) return;
    const queued = await this.deps.db
      .selectFrom('commands')
      .select('id')
      .where('device_id', '=', flush.device_id)
      .where('connector_id', '=', flush.connector_id)
      .where('kind', '=', 'queue')
      .where('status', '=', 'queued')
      .where('requested_at', '<=', flush.requested_at)
      .execute();
    const context = { actor: ACTOR, correlationId: e.metadata.correlationId, causationId: e.id, now: e.data.at };
    for (const q of queued) await this.record(q.id, { type: 'DownlinkFlushed', data: { id: q.id, at: e.data.at, byCommand: e.data.id } }, context);
  }
}
