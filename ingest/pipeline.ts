import { performance } from 'node:perf_hooks';
import type { Counter, Histogram } from 'prom-client';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import type { NewEvent } from '../domain/shared/events.js';
import { newEventId, newResourceId } from '../domain/shared/ids.js';
import { RecentMemory } from '../domain/shared/recentMemory.js';
import { toNewEvent } from '../domain/shared/decider.js';
import { connectorRegistration, decideUplink, deviceStream, mqttRegistration, type DeviceDoc } from '../domain/devices/device.js';
import { accessDecider, accessStream } from '../domain/access/rights.js';
import type { Scope } from '../domain/access/scopes.js';
import type { Database } from '../projections/database.js';
import type { Registry, ReservedTopicInfo } from './registry.js';
import type { LogWriter } from '../domain/logs/writer.js';
import type { Decoded, Decoder } from './translate.js';

/** How long one turn may decode uplinks ahead before it leaves the rest to the next turn (`decodeTurn`). */
const SLOW_TURN_MS = 50;

/**
 * An accepted report, waiting to become a device event. It comes on a
 * reserved MQTT topic (the device is the one whose secret is the reserved
 * topic, created by its first message), on a topic of a Generic connector's
 * external broker (the same, among that connector's devices), or for a device
 * already known (a network server's uplink, found by its connector and DevEUI).
 */
export type IngestMessage = IngestCommon & (
  | {
      kind: 'topic';
      reserved: ReservedTopicInfo;
      /** Levels below the reserved topic; empty for the reserved topic itself. */
      path: string[];
      topic: string;
    }
  | {
      kind: 'external';
      /** The Generic connector whose external broker delivered it: its actor, and where refusals are logged. */
      connectorId: string;
      /** The topic at that broker: the secret of its device. */
      topic: string;
    }
  | {
      kind: 'device';
      deviceId: string;
      /** Where it came from, as `DeviceReported.topic`: `integration:<name>/<connectorId>`. */
      topic: string;
      /** The connector it came through: its actor, and where refusals are logged. */
      connectorId: string;
    }
);

interface IngestCommon {
  payload: DeviceDoc;
  receivedAt: string;
  /** `mqtt:<hash>:<packet id or ->:<client id>`: the message, as correlation id of its event. */
  correlationId: string;
  /**
   * For QoS > 0: `<credentials set id>\0<client id>\0<packet id>`, the message
   * hash, and whether the publish carried DUP, to recognise a re-send.
   */
  dedup?: { key: string; hash: string; redelivery: boolean };
  /** Called once the event is durably stored (or the message was dropped on purpose); an error closes the connection. */
  done: (error?: Error | null) => void;
  /** The publisher's connection: corked while a batch's acknowledgements are written, so they leave in one write. */
  conn?: { cork(): void; uncork(): void };
  /** The publisher connection's id, unique across the cluster's nodes: a packet id without DUP on the connection that stored it is a new message. */
  connection?: string;
  /** When the pipeline took it (`performance.now()`), kept only while metrics are on. */
  arrivedAt?: number;
  /** Its decode, started when it arrived (`decodeAhead`), and the device it was decoded for. */
  ahead?: { deviceId: string; decoding: Promise<Decoded> };
  /** Taken into a batch: from then on the batch decodes it, if it was not decoded ahead. */
  taken?: boolean;
}

export interface PipelineOptions {
  /** How long the first message of a batch waits for others. */
  lingerMs?: number;
  maxBatch?: number;
  /** Decodes raw uplinks (`encodedData`) with the device's translators before the report becomes an event. */
  decoder?: Decoder;
  /** In a cluster: the redelivery memory of every node (`ingest/cluster.ts`), asked for keys this node does not remember. */
  redeliveries?: { get(keys: string[]): Promise<(Remembered | null)[]>; put(entries: ({ key: string } & Remembered)[]): Promise<void> };
  /** How many stored QoS > 0 messages the node remembers itself; 200,000 unless set. */
  memory?: number;
  metrics?: IngestMetrics;
}

/** What the pipeline reports, once per batch. */
export interface IngestMetrics {
  batchSize: Histogram;
  batchSeconds: Histogram;
  /** The wait of a batch's oldest message, from `submit` to its acknowledgement. */
  latency: Histogram;
  messages: Counter<'outcome'>;
}

/** How many of the latest stored events a node looks through for messages it may have stored before (a restart, another node's crash). */
const SEED_WINDOW = 100_000;

/** Recently stored QoS > 0 messages kept for recognising redeliveries. */
const DEDUP_CAPACITY = 200_000;

/** Who a message is stored for, and where its refusals are logged: its credentials set, or its connector. */
const ownerOf = (m: IngestMessage) =>
  m.kind === 'topic' ? { actor: `credentials:${m.reserved.setId}`, resourceId: m.reserved.setId, resourceType: 'credentialsSet' } : { actor: `connector:${m.connectorId}`, resourceId: m.connectorId, resourceType: 'connector' };

/** A message's text in a log entry about it. */
const messageOf = (m: IngestMessage) => (m.kind === 'device' ? `Uplink for iotnode ${m.deviceId}` : `MQTT message on ${m.topic}`);

/** The redelivery key of a message: packet ids are per client id, and client ids per credentials set (or per external broker's connector). */
export const dedupKey = (setId: string, clientId: string, packetId: number | string) => `${setId}\u0000${clientId}\u0000${packetId}`;

/** What one stored QoS > 0 message leaves for recognising a re-send of it. */
export interface Remembered {
  hash: string;
  /** The id of the connection that published it (`IngestMessage.connection`); null when not known (a message remembered from the store, one without a connection). */
  connection: string | null;
}

/** One accepted message and the events it becomes: stored all together, or not at all. */
interface Unit {
  message: IngestMessage;
  appends: Map<string, NewEvent[]>;
  /** A device this message creates, and the resource (credentials set or connector) whose access rights pass to it. */
  created: { deviceId: string; from: string; actor: string; createdBy: string } | null;
}

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
  /** Redelivery key → the last stored message with that key. */
  private readonly stored: RecentMemory<string, Remembered>;
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
    this.metrics = options.metrics ?? null;
    this.redeliveries = options.redeliveries ?? null;
    this.stored = new RecentMemory(options.memory ?? DEDUP_CAPACITY);
  }
  private readonly decoder: Decoder | null;
  private readonly metrics: IngestMetrics | null;
  private readonly redeliveries: PipelineOptions['redeliveries'] | null;

  /**
   * Fills the redelivery memory from the latest stored reports, so a message
   * stored just before a crash and sent again after the restart is stored once.
   */
  async seed(limit = SEED_WINDOW): Promise<void> {
    if (this.store.kind !== 'postgres') return;
    const { rows } = await sql<{ c: string; a: string }>`SELECT metadata->>'correlationId' AS c, metadata->>'actor' AS a FROM es.events
      WHERE type = 'DeviceReported' ORDER BY global_position DESC LIMIT ${limit}`.execute(this.db);
    for (const { c, a } of rows.reverse()) {
      const m = /^mqtt:([0-9a-f]+):(\d+):(.*)$/s.exec(c ?? '');
      const set = /^(?:credentials|connector):(.+)$/.exec(a ?? '');
      if (m && set) this.stored.set(dedupKey(set[1]!, m[3]!, m[2]!), { hash: m[1]!, connection: null });
    }
  }

  submit(message: IngestMessage): void {
    if (this.closed) return message.done(new Error('the platform is stopping'));
    if (this.metrics) message.arrivedAt = performance.now();
    if (this.decoder) this.queueAhead(message);
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

  /**
   * Stores what was submitted so far, in as many batches as it takes, without waiting for the linger
   * (its publishers get their acknowledgements); messages submitted meanwhile are taken as usual.
   */
  async drain(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    do await this.exclusive(async () => this.flush());
    while (this.pending.length);
  }

  /** Stops taking messages and stores every one taken (the batch in flight, then the rest). */
  async close(): Promise<void> {
    this.closed = true;
    await this.drain();
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

  /** Messages that arrived in this turn of the event loop, to be decoded together once it ends (`decodeAhead`). */
  private arrived: IngestMessage[] = [];

  /**
   * Decodes the messages of one turn of the event loop one after another, once
   * the turn's I/O is read: the sandbox's code and memory stay in the
   * processor's caches from one call to the next, instead of being fetched
   * again between the broker's work on each message.
   */
  private queueAhead(m: IngestMessage): void {
    this.arrived.push(m);
    if (this.arrived.length > 1) return;
    setImmediate(() => this.decodeTurn());
  }

  private decodeTurn(): void {
    const turn = this.arrived;
    this.arrived = [];
    const started = performance.now();
    for (let i = 0; i < turn.length; i++) {
      const x = turn[i]!;
      if (!x.taken) this.decodeAhead(x);
      // A sandbox call runs to its end before the next starts, and a time-out's strike is counted only once the call's
      // promise settles: a turn that has run long (a decoder meeting its time limit) leaves the rest to the next turn,
      // so strikes, and the suspension three of them bring, take hold between one call and the next.
      if (performance.now() - started > SLOW_TURN_MS && i + 1 < turn.length) {
        this.arrived = [...turn.slice(i + 1), ...this.arrived];
        setImmediate(() => this.decodeTurn());
        return;
      }
    }
  }

  /**
   * Starts decoding a message as it arrives, when its decode needs nothing of
   * the reports ahead of it (`Decoder.decodeAhead`): the sandbox call then runs
   * while the batch before it waits for its commit, instead of after. A
   * message that may be a re-send is left to the batch, which answers a
   * re-send without decoding it.
   */
  private decodeAhead(m: IngestMessage): void {
    if (m.dedup && (m.dedup.redelivery || this.stored.has(m.dedup.key))) return;
    const deviceId = m.kind === 'topic' ? (m.path.length === 0 ? this.registry.deviceOfSecret(m.reserved.topic) : undefined) : m.kind === 'device' ? m.deviceId : undefined;
    if (!deviceId) return;
    const decoding = this.decoder!.decodeAhead(deviceId, m.payload, m.receivedAt);
    if (decoding) m.ahead = { deviceId, decoding };
  }

  /**
   * A re-send of a message already stored: the same key and content, sent
   * with DUP, or sent on a later connection than the one that stored it
   * (MQTT.js re-sends unacknowledged publishes after a reconnect with DUP
   * clear). On the connection that stored it, a packet id without DUP is a
   * new message: a client reuses an id once it has its acknowledgement.
   */
  private isResend(m: IngestMessage): boolean {
    if (!m.dedup) return false;
    const before = this.stored.get(m.dedup.key);
    return before !== undefined && before.hash === m.dedup.hash && (m.dedup.redelivery || before.connection !== (m.connection ?? null));
  }

  private async flush(): Promise<void> {
    const batch = this.pending.splice(0, this.maxBatch);
    if (batch.length === 0) return;
    for (const m of batch) m.taken = true;
    const started = this.metrics ? performance.now() : 0;
    if (this.redeliveries) await this.recall(batch);
    await this.lookUpStored(batch);
    const units: Unit[] = [];
    const answered: IngestMessage[] = [];
    // A message and its re-send in one batch: the re-send waits for the next batch, which knows whether the first was
    // stored (then it is answered as a re-send) or not (then it is stored).
    const inBatch = new Map<string, string>();
    const later: IngestMessage[] = [];
    for (const m of batch) {
      if (m.dedup && inBatch.get(m.dedup.key) === m.dedup.hash) {
        later.push(m);
        continue;
      }
      if (m.dedup) inBatch.set(m.dedup.key, m.dedup.hash);
      if (this.isResend(m)) {
        answered.push(m);
        continue;
      }
      try {
        const unit = await this.unitOf(m);
        if (unit) units.push(unit);
        else answered.push(m);
      } catch (err) {
        // A message the pipeline cannot turn into events is set aside alone; the rest of the batch goes on.
        this.log.error({ err, topic: m.topic }, 'an MQTT message could not be turned into events');
        this.refuse(m, 'the platform could not process it');
        answered.push(m);
      }
    }

    let outcome: { stored: Unit[]; refused: Unit[]; failed: Unit[] };
    try {
      await this.addPassedRights(units);
      outcome = await this.storeUnits(units);
    } catch (err) {
      outcome = { stored: [], refused: [], failed: units };
      this.log.error({ err, messages: batch.length }, 'ingest batch failed; publishers are disconnected and will send again');
    }
    for (const u of [...outcome.refused, ...outcome.failed]) {
      if (u.created) this.forgetCreated(u.created.deviceId);
      this.decoder?.forget([...u.appends.keys()].filter((s) => s.startsWith(deviceStream(''))).map((s) => s.slice(deviceStream('').length)));
    }
    for (const u of outcome.refused) this.refuse(u.message, 'the database refused its content');
    const remembered: ({ key: string } & Remembered)[] = [];
    for (const { message: m } of outcome.stored) {
      if (!m.dedup) continue;
      const r = { key: m.dedup.key, hash: m.dedup.hash, connection: m.connection ?? null };
      this.stored.set(r.key, r);
      remembered.push(r);
    }
    // Before the PUBACKs: a publisher that reconnects to another node and sends again must find them.
    if (this.redeliveries) await this.redeliveries.put(remembered);
    for (const u of outcome.failed) u.message.done(new Error('storing the message failed'));

    if (later.length) this.pending.unshift(...later);
    const acked = [...answered, ...outcome.stored.map((u) => u.message), ...outcome.refused.map((u) => u.message)];
    const conns = new Set(acked.map((m) => m.conn).filter((c) => c !== undefined));
    for (const c of conns) c.cork();
    for (const m of acked) m.done(null);
    // aedes writes the PUBACKs as the callbacks run; they leave together when the connections are uncorked.
    if (conns.size) setTimeout(() => { for (const c of conns) c.uncork(); }, 0);
    if (this.metrics) this.measure(batch, started, answered.length, outcome);
  }

  private measure(batch: IngestMessage[], started: number, answered: number, outcome: { stored: Unit[]; refused: Unit[]; failed: Unit[] }): void {
    const m = this.metrics!;
    const now = performance.now();
    m.batchSize.observe(batch.length);
    m.batchSeconds.observe((now - started) / 1000);
    if (batch[0]!.arrivedAt !== undefined) m.latency.observe((now - batch[0]!.arrivedAt) / 1000);
    if (outcome.stored.length) m.messages.inc({ outcome: 'stored' }, outcome.stored.length);
    if (answered) m.messages.inc({ outcome: 'answered' }, answered);
    if (outcome.refused.length) m.messages.inc({ outcome: 'refused' }, outcome.refused.length);
    if (outcome.failed.length) m.messages.inc({ outcome: 'failed' }, outcome.failed.length);
  }

  /**
   * Learns from Redis which of the batch's keys the cluster's nodes stored
   * (this one included, for what it has forgotten since), and on which
   * connection. A re-send (DUP) that no node remembers may
   * come from a node that died between storing it and recording it in Redis:
   * it is looked for among the latest reports in the store, as at start (`seed`).
   */
  private async recall(batch: IngestMessage[]): Promise<void> {
    const keys = [...new Set(batch.flatMap((m) => (m.dedup && !this.stored.has(m.dedup.key) ? [m.dedup.key] : [])))];
    const found = await this.redeliveries!.get(keys);
    keys.forEach((key, i) => {
      const r = found[i];
      if (r) this.stored.set(key, r);
    });
  }

  /**
   * Looks for the batch's possible re-sends that the memory does not know among the latest reports in the store, by
   * their correlation id (indexed): a re-send (DUP) from a node that died before it recorded the original in Redis,
   * or a network server's retry after a restart (the memory is seeded with MQTT messages only, whose correlation id
   * carries the content's hash).
   */
  private async lookUpStored(batch: IngestMessage[]): Promise<void> {
    const unknown = batch.filter((m) => m.dedup?.redelivery && !this.stored.has(m.dedup.key));
    if (unknown.length === 0 || this.store.kind !== 'postgres') return;
    try {
      const { rows } = await sql<{ c: string }>`SELECT metadata->>'correlationId' AS c FROM es.events
        WHERE global_position > (SELECT coalesce(max(global_position), 0) - ${SEED_WINDOW} FROM es.events)
          AND type = 'DeviceReported' AND metadata->>'correlationId' = ANY(${unknown.map((m) => m.correlationId)}::text[])`.execute(this.db);
      const inStore = new Set(rows.map((r) => r.c));
      for (const m of unknown) if (inStore.has(m.correlationId)) this.stored.set(m.dedup!.key, { hash: m.dedup!.hash, connection: null });
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'looking up re-sent messages in the store failed; they are treated as new');
    }
  }

  /** A message that will not be stored, logged on its credentials set; its publisher gets its PUBACK. */
  private refuse(m: IngestMessage, why: string): void {
    const owner = ownerOf(m);
    this.logs.write({
      resourceId: owner.resourceId,
      resourceType: owner.resourceType,
      type: 'error',
      priority: 'high',
      category: 'update',
      message: `${messageOf(m)} not stored: ${why}`,
    }, `refused ${why}`);
  }

  /** The events one message becomes, or null when it is answered without storing anything. */
  private async unitOf(m: IngestMessage): Promise<Unit | null> {
    const context = { actor: ownerOf(m).actor, correlationId: m.correlationId, now: m.receivedAt };
    const appends = new Map<string, NewEvent[]>();
    const add = (stream: string, event: NewEvent) => appends.set(stream, [...(appends.get(stream) ?? []), event]);
    let created: Unit['created'] = null;
    const path = m.kind === 'topic' ? m.path : [];
    let deviceId = m.kind === 'topic' ? this.registry.deviceOfSecret(m.reserved.topic) : m.kind === 'external' ? this.registry.deviceOfSecret(m.topic) : m.deviceId;
    if (m.kind === 'external') {
      // Secrets are unique platform-wide: a topic that is the secret of a device of another connector, or of none, names a device this connector may not write.
      if (deviceId && this.registry.bindingOf(deviceId).connector !== m.connectorId) {
        this.refuse(m, 'the topic is the secret of an iotnode that is not of this connector');
        return null;
      }
      if (!deviceId) {
        const connector = this.registry.connector(m.connectorId);
        if (!connector) return null;
        deviceId = newResourceId();
        this.registry.putSecret(deviceId, m.topic);
        this.registry.bindDevice(deviceId, { connector: m.connectorId });
        created = { deviceId, from: connector.id, actor: context.actor, createdBy: connector.createdBy };
        add(deviceStream(deviceId), toNewEvent(connectorRegistration(deviceId, m.topic, connector.id, connector.createdBy, m.receivedAt), context));
      }
    }
    if (!deviceId) {
      if (m.kind !== 'topic') return null;
      const secret = m.reserved.topic;
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
        return null;
      }
      const set = this.registry.credentialsSet(m.reserved.setId);
      if (!set) return null;
      deviceId = newResourceId();
      this.registry.putSecret(deviceId, secret);
      created = { deviceId, from: set.id, actor: context.actor, createdBy: set.createdBy };
      add(deviceStream(deviceId), toNewEvent(mqttRegistration(deviceId, secret, set.id, set.createdBy, m.receivedAt), context));
    }
    try {
      // Only reports on the device's own topic are decoded; a device created by this very message has no translator yet.
      const decoding = path.length > 0 ? null : m.ahead?.deviceId === deviceId ? m.ahead.decoding : this.decoder?.decode(deviceId, m.payload, m.receivedAt);
      const decoded = decoding ? await decoding : null;
      if (decoded) this.decoder!.settled(decoded, m.receivedAt);
      const report = decideUplink({ type: 'ReportDevice', id: deviceId, source: m.topic, path, payload: decoded?.payload ?? m.payload, updates: decoded?.updates ?? [], reportedAt: m.receivedAt });
      if (report.ignored.length) {
        this.logs.write({
          resourceId: deviceId,
          resourceType: 'device',
          type: 'warning',
          priority: 'low',
          category: 'update',
          message: `Reported fields ${report.ignored.join(', ')} were ignored: they are set by the platform or through the REST API, or lnglat is not a GeoJSON Point`,
        }, 'ignored fields');
      }
      for (const a of report.appends) for (const event of a.events) add(a.streamId, toNewEvent(event, context, newEventId()));
    } catch (err) {
      if (created) this.forgetCreated(created.deviceId);
      throw err;
    }
    // Nothing to store (a report whose every field was ignored): answered, like a dropped message.
    if (appends.size === 0) return null;
    return { message: m, appends, created };
  }

  /** A device created by a message that was not stored after all: the registry forgets its secret and its connector. */
  private forgetCreated(deviceId: string): void {
    this.registry.forgetSecret(deviceId);
    this.registry.bindDevice(deviceId, {});
  }

  /**
   * Stores the units: all in one append when that works, the usual case.
   * Otherwise unit by unit, each all or nothing, so one message whose events
   * cannot be stored (whatever the reason) is refused alone: a unit that
   * fails twice while the store answers is refused; when the store itself
   * does not answer, the unit and every later one fail, and their publishers
   * send them again.
   */
  private async storeUnits(units: Unit[]): Promise<{ stored: Unit[]; refused: Unit[]; failed: Unit[] }> {
    if (units.length === 0) return { stored: [], refused: [], failed: [] };
    if (this.store.appendMany) {
      const merged = new Map<string, NewEvent[]>();
      for (const u of units) for (const [stream, events] of u.appends) merged.set(stream, [...(merged.get(stream) ?? []), ...events]);
      try {
        await this.store.appendMany([...merged].map(([streamId, events]) => ({ streamId, events })));
        return { stored: units, refused: [], failed: [] };
      } catch (err) {
        this.log.warn({ err: (err as Error).message, messages: units.length }, 'ingest batch append failed; storing message by message');
      }
    }
    const stored: Unit[] = [];
    const refused: Unit[] = [];
    for (const [i, u] of units.entries()) {
      try {
        await this.appendUnit(u);
        stored.push(u);
        continue;
      } catch (err) {
        if (!(await this.storeAnswers())) {
          this.log.error({ err }, 'the event store does not answer; the rest of the batch is not stored');
          return { stored, refused, failed: units.slice(i) };
        }
        try {
          await this.appendUnit(u);
          stored.push(u);
        } catch (again) {
          this.log.warn({ err: again, topic: u.message.topic }, 'an MQTT message was refused by the event store');
          refused.push(u);
        }
      }
    }
    return { stored, refused, failed: [] };
  }

  /** One message's events, atomically where the store can append to several streams at once. */
  private async appendUnit(u: Unit): Promise<void> {
    const appends = [...u.appends].map(([streamId, events]) => ({ streamId, events }));
    if (this.store.appendMany) {
      try {
        await this.store.appendMany(appends);
        return;
      } catch (err) {
        // An event id already stored (a retry whose answer was lost): appending stream by stream is a no-op for what is there.
        if ((err as { code?: string }).code !== '23505') throw err;
      }
    }
    for (const a of appends) await this.store.append(a.streamId, a.events, 'any');
  }

  private async storeAnswers(): Promise<boolean> {
    try {
      await this.store.readAll({ after: null, limit: 1 });
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The credentials set's access rights pass to a device created on its
   * topics, and a connector's to a device its external broker created (its
   * creator already gets full rights from the registration). The
   * grants join the batch's append, so they are stored atomically with the
   * device's `DeviceRegistered`: a PUBACK means both are there, and a crash
   * can lose neither. The set's rights are read from the read model, which
   * REST grants wait for before they answer.
   */
  private async addPassedRights(units: Unit[]): Promise<void> {
    const created = units.flatMap((u) => (u.created ? [{ ...u.created, streams: u.appends }] : []));
    if (created.length === 0) return;
    const records = await this.db
      .selectFrom('access_rights')
      .select(['resource_id', 'subject_type', 'subject_id', 'scope'])
      .where('resource_id', 'in', [...new Set(created.map((c) => c.from))])
      .orderBy('subject_type')
      .orderBy('subject_id')
      .execute();
    for (const c of created) {
      const registered = c.streams.get(deviceStream(c.deviceId))![0]!;
      const now = registered.metadata.time;
      const context = { actor: c.actor, correlationId: registered.metadata.correlationId, causationId: registered.id, now };
      const grants: NewEvent[] = [];
      for (const r of records) {
        if (r.resource_id !== c.from || (r.subject_type === 'user' && r.subject_id === c.createdBy)) continue;
        const command = { type: 'Grant' as const, resourceType: 'device', resourceId: c.deviceId, subjectType: r.subject_type, subjectId: r.subject_id, scope: r.scope as Scope[], at: now };
        try {
          for (const event of accessDecider.decide(command, accessDecider.initialState())) grants.push(toNewEvent(event, context));
        } catch (err) {
          this.log.error({ err, deviceId: c.deviceId, from: c.from, subjectId: r.subject_id }, 'a right could not pass to a new device');
        }
      }
      if (grants.length) c.streams.set(accessStream(c.deviceId), grants);
    }
  }
}
