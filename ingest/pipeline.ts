import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import type { NewEvent } from '../domain/shared/events.js';
import { newResourceId } from '../domain/shared/ids.js';
import { RecentMemory } from '../domain/shared/recentMemory.js';
import { toNewEvent } from '../domain/shared/decider.js';
import { deviceStream, mqttRegistration, reportableFields, type DeviceDoc, type DeviceEvent } from '../domain/devices/device.js';
import { accessDecider, accessStream } from '../domain/access/rights.js';
import type { Scope } from '../domain/access/scopes.js';
import type { Database } from '../projections/database.js';
import type { Registry, ReservedTopicInfo } from './registry.js';
import type { LogWriter } from './logWriter.js';
import type { Decoder } from './translate.js';

/** An accepted publish, waiting to become a device event. */
export interface IngestMessage {
  reserved: ReservedTopicInfo;
  /** Levels below the reserved topic; empty for the reserved topic itself. */
  path: string[];
  topic: string;
  payload: DeviceDoc;
  receivedAt: string;
  /** `mqtt:<hash>:<packet id or ->:<client id>`: the message, as correlation id of its event. */
  correlationId: string;
  /** For QoS > 0: `<client id>\0<packet id>` and the message hash, to recognise a redelivery. */
  dedup?: { key: string; hash: string; redelivery: boolean };
  /** Called once the event is durably stored (or the message was dropped on purpose); an error closes the connection. */
  done: (error?: Error | null) => void;
  /** The publisher's connection: corked while a batch's acknowledgements are written, so they leave in one write. */
  conn?: { cork(): void; uncork(): void };
}

export interface PipelineOptions {
  /** How long the first message of a batch waits for others. */
  lingerMs?: number;
  maxBatch?: number;
  /** Decodes raw uplinks (`encodedData`) with the device's translators before the report becomes an event. */
  decoder?: Decoder;
}

/** Recently stored QoS > 0 messages kept for recognising redeliveries. */
const DEDUP_CAPACITY = 200_000;

/**
 * Turns accepted publishes into device events. Messages are collected for a
 * few milliseconds (or up to `maxBatch`), then every device's events of the
 * batch are appended in one statement; only then are the publishers
 * acknowledged, so a PUBACK means the event is stored. Batches run one at a
 * time and keep arrival order, so each device's messages apply in order.
 */
export class IngestPipeline {
  private pending: IngestMessage[] = [];
  private timer: NodeJS.Timeout | null = null;
  private lock: Promise<unknown> = Promise.resolve();
  private flushing = false;
  /** `<client id>\0<packet id>` → hash of the last stored message with that packet id. */
  private stored = new RecentMemory<string, string>(DEDUP_CAPACITY);
  private readonly lingerMs: number;
  private readonly maxBatch: number;
  private closed = false;

  constructor(
    private readonly store: EventStore,
    private readonly db: Kysely<Database>,
    private readonly registry: Registry,
    private readonly logs: LogWriter,
    private readonly log: Logger,
    options: PipelineOptions = {},
  ) {
    this.lingerMs = options.lingerMs ?? 4;
    this.maxBatch = options.maxBatch ?? 2000;
    this.decoder = options.decoder ?? null;
  }
  private readonly decoder: Decoder | null;

  /**
   * Fills the redelivery memory from the latest stored reports, so a message
   * stored just before a crash and sent again after the restart is stored once.
   */
  async seed(limit = 100_000): Promise<void> {
    if (this.store.kind !== 'postgres') return;
    const { rows } = await sql<{ c: string }>`SELECT metadata->>'correlationId' AS c FROM es.events
      WHERE type = 'DeviceReported' ORDER BY global_position DESC LIMIT ${limit}`.execute(this.db);
    for (const { c } of rows.reverse()) {
      const m = /^mqtt:([0-9a-f]+):(\d+):(.*)$/s.exec(c ?? '');
      if (m) this.stored.set(`${m[3]}\u0000${m[2]}`, m[1]!);
    }
  }

  submit(message: IngestMessage): void {
    if (this.closed) return message.done(new Error('the platform is stopping'));
    this.pending.push(message);
    if (this.pending.length >= this.maxBatch) this.schedule(0);
    else if (!this.timer && !this.flushing) this.schedule(this.lingerMs);
  }

  /** Runs `fn` between batches: REST writes that decide on a device's secret use it, so they never race a first message. */
  exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.lock.then(fn);
    this.lock = run.catch(() => undefined);
    return run;
  }

  /** Stops taking messages and waits for the batch in flight. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    await this.exclusive(async () => this.flush());
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flushing = true;
      void this.exclusive(() => this.flush()).finally(() => {
        this.flushing = false;
        if (this.pending.length) this.schedule(this.pending.length >= this.maxBatch ? 0 : Math.min(this.lingerMs, 1));
      });
    }, ms);
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, this.maxBatch);
    if (batch.length === 0) return;
    const streams = new Map<string, NewEvent[]>();
    const created: { deviceId: string; setId: string; createdBy: string }[] = [];
    const acked: IngestMessage[] = [];
    const remembered: { key: string; hash: string }[] = [];

    for (const m of batch) {
      if (m.dedup?.redelivery && this.stored.get(m.dedup.key) === m.dedup.hash) {
        acked.push(m);
        continue;
      }
      const secret = m.reserved.topic;
      let deviceId = this.registry.deviceOfSecret(secret);
      const context = { actor: `credentials:${m.reserved.setId}`, correlationId: m.correlationId, now: m.receivedAt };
      if (!deviceId) {
        if (m.path.length > 0) {
          // A sub-topic only updates an existing device; it never creates one.
          this.logs.write({
            resourceId: m.reserved.setId,
            resourceType: 'credentialsSet',
            type: 'warning',
            priority: 'medium',
            category: 'update',
            message: `Message on ${m.topic} dropped: no device exists yet for the reserved topic ${secret}; publish on ${secret} first`,
          }, `no device for ${secret}`);
          acked.push(m);
          continue;
        }
        const set = this.registry.credentialsSet(m.reserved.setId);
        if (!set) {
          acked.push(m);
          continue;
        }
        deviceId = newResourceId();
        this.registry.putSecret(deviceId, secret);
        created.push({ deviceId, setId: set.id, createdBy: set.createdBy });
        streams.set(deviceStream(deviceId), [toNewEvent(mqttRegistration(deviceId, secret, set.id, set.createdBy, m.receivedAt), context)]);
      }
      // Only reports on the device's own topic are decoded; a device created by this very message has no translator yet.
      const decoding = m.path.length === 0 ? this.decoder?.decode(deviceId, m.payload, m.receivedAt) : null;
      const decoded = decoding ? await decoding : null;
      const { kept, dropped } = reportableFields(decoded?.payload ?? m.payload, m.path.length > 0);
      if (dropped.length) {
        this.logs.write({
          resourceId: deviceId,
          resourceType: 'device',
          type: 'warning',
          priority: 'low',
          category: 'update',
          message: `Reported fields ${dropped.join(', ')} were ignored: they are set by the platform or through the REST API, or lnglat is not a GeoJSON Point`,
        }, 'ignored fields');
      }
      const event: DeviceEvent = { type: 'DeviceReported', data: { id: deviceId, topic: m.topic, path: m.path, payload: kept, reportedAt: m.receivedAt } };
      const stream = deviceStream(deviceId);
      const list = streams.get(stream) ?? [];
      list.push(toNewEvent(event, context, randomUUID()));
      streams.set(stream, list);
      for (const u of decoded?.updates ?? []) {
        const sub: DeviceEvent = { type: 'DeviceReported', data: { id: u.deviceId, topic: m.topic, path: [], payload: u.payload, reportedAt: m.receivedAt } };
        const subStream = deviceStream(u.deviceId);
        streams.set(subStream, [...(streams.get(subStream) ?? []), toNewEvent(sub, context, randomUUID())]);
      }
      acked.push(m);
      if (m.dedup) remembered.push(m.dedup);
    }

    let rejected: string[];
    try {
      await this.addPassedRights(created, streams);
      rejected = await this.append(streams);
    } catch (err) {
      this.log.error({ err, messages: batch.length }, 'ingest batch failed; publishers are disconnected and will send again');
      for (const c of created) this.registry.forgetSecret(c.deviceId);
      this.decoder?.forget([...streams.keys()].map((stream) => stream.slice(deviceStream('').length)));
      for (const m of batch) m.done(new Error('storing the message failed'));
      return;
    }
    for (const stream of rejected) {
      const deviceId = stream.slice(deviceStream('').length);
      if (created.some((c) => c.deviceId === deviceId)) this.registry.forgetSecret(deviceId);
      this.logs.write({
        resourceId: deviceId,
        resourceType: 'device',
        type: 'error',
        priority: 'high',
        category: 'update',
        message: 'Messages not stored: the database refused their content (for example a lone surrogate in a string)',
      }, 'refused content');
    }
    for (const r of remembered) this.stored.set(r.key, r.hash);
    const conns = new Set(acked.map((m) => m.conn).filter((c) => c !== undefined));
    for (const c of conns) c.cork();
    for (const m of acked) m.done(null);
    // aedes writes the PUBACKs as the callbacks run; they leave together when the connections are uncorked.
    if (conns.size) setTimeout(() => { for (const c of conns) c.uncork(); }, 0);
  }

  /**
   * Appends the batch; returns the streams whose events the database refused
   * as data (SQLSTATE class 22, such as a lone surrogate in a string), so one
   * bad message cannot block the others of its batch for ever.
   */
  private async append(streams: Map<string, NewEvent[]>): Promise<string[]> {
    if (streams.size === 0) return [];
    const appends = [...streams].map(([streamId, events]) => ({ streamId, events }));
    const dataError = (err: unknown) => String((err as { code?: string }).code ?? '').startsWith('22');
    if (this.store.appendMany) {
      try {
        await this.store.appendMany(appends);
        return [];
      } catch (err) {
        // An event id already stored (a retry of a batch whose answer was lost), or bad data: store stream by stream.
        if ((err as { code?: string }).code !== '23505' && !dataError(err)) throw err;
      }
    }
    const rejected: string[] = [];
    for (const a of appends) {
      // The rights passed to a new device go only with the device itself.
      if (a.streamId.startsWith(accessStream('')) && rejected.includes(deviceStream(a.streamId.slice(accessStream('').length)))) continue;
      try {
        await this.store.append(a.streamId, a.events, 'any');
      } catch (err) {
        if (!dataError(err)) throw err;
        rejected.push(a.streamId);
      }
    }
    return rejected;
  }

  /**
   * The credentials set's access rights pass to a device created on its
   * topics (its creator already gets full rights from the registration). The
   * grants join the batch's append, so they are stored atomically with the
   * device's `DeviceRegistered`: a PUBACK means both are there, and a crash
   * can lose neither. The set's rights are read from the read model, which
   * REST grants wait for before they answer.
   */
  private async addPassedRights(created: { deviceId: string; setId: string; createdBy: string }[], streams: Map<string, NewEvent[]>): Promise<void> {
    if (created.length === 0) return;
    const records = await this.db
      .selectFrom('access_rights')
      .select(['resource_id', 'subject_type', 'subject_id', 'scope'])
      .where('resource_id', 'in', [...new Set(created.map((c) => c.setId))])
      .orderBy('subject_type')
      .orderBy('subject_id')
      .execute();
    for (const c of created) {
      const registered = streams.get(deviceStream(c.deviceId))![0]!;
      const now = registered.metadata.time;
      const context = { actor: `credentials:${c.setId}`, correlationId: registered.metadata.correlationId, causationId: registered.id, now };
      const grants: NewEvent[] = [];
      for (const r of records) {
        if (r.resource_id !== c.setId || (r.subject_type === 'user' && r.subject_id === c.createdBy)) continue;
        const command = { type: 'Grant' as const, resourceType: 'device', resourceId: c.deviceId, subjectType: r.subject_type, subjectId: r.subject_id, scope: r.scope as Scope[], at: now };
        try {
          for (const event of accessDecider.decide(command, accessDecider.initialState())) grants.push(toNewEvent(event, context));
        } catch (err) {
          this.log.error({ err, deviceId: c.deviceId, setId: c.setId, subjectId: r.subject_id }, 'a right of the credentials set could not pass to its new device');
        }
      }
      if (grants.length) streams.set(accessStream(c.deviceId), grants);
    }
  }
}
