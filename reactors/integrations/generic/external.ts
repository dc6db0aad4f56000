import { createHash } from 'node:crypto';
import mqtt, { type IClientOptions, type IPublishPacket, type MqttClient } from 'mqtt';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../../../domain/eventstore/port.js';
import type { RecordedEvent } from '../../../domain/shared/events.js';
import { handle } from '../../../domain/shared/decider.js';
import { RecentMemory } from '../../../domain/shared/recentMemory.js';
import { connectorDecider, connectorStream, type ConnectorEvent } from '../../../domain/connectors/connector.js';
import { ALLOWED_ROOTS } from '../../../domain/topics/reservedTopic.js';
import type { LogWriter } from '../../../domain/logs/writer.js';
import type { Database } from '../../../projections/database.js';
import type { Projection } from '../../../projections/runner.js';
import type { ConnectorInfo, Registry } from '../../../ingest/registry.js';
import type { Ingest } from '../../../ingest/index.js';
import { messageHash, readPayload } from '../../../ingest/payload.js';

/**
 * Reconnection back-off: the waits before each new attempt after a connection
 * failed or was lost (the last one repeats), each with ±20 % jitter so many
 * connectors of one broker do not all knock at once after its outage.
 */
export const RECONNECT_MS = [500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];
const CONNECT_TIMEOUT_MS = 10_000;
const KEEPALIVE_S = 60;
/** How long `stop` waits for a broker to take the DISCONNECT before the socket is closed. */
const END_WAIT_MS = 2_000;
const ACTOR = 'system:external-broker';
/**
 * Given to MQTT.js's `handleMessage` callback for a QoS 1 message: it goes on
 * with the next message and sends no PUBACK, which the link sends itself
 * once the message is stored.
 */
const ACK_WHEN_STORED = new Error('acknowledged once stored');
/**
 * Messages of one connection handed to ingest and not yet stored; past this many the connection's socket is paused
 * until fewer are left. QoS 0 messages have no in-flight window at the broker, so without it a broker that floods the
 * platform would queue without bound ahead of every other publisher's messages.
 */
const MAX_STORING = 2_000;
/** An MQTT 3.1.1 PUBACK: fixed header, remaining length 2, the packet id. */
const pubAck = (id: number) => Buffer.from([0x40, 0x02, id >> 8, id & 0xff]);

/** A QoS 1 message taken from a connection, waiting for its PUBACK. */
interface PendingAck {
  stream: unknown;
  id: number;
  ready: boolean;
}

interface MqttServer {
  host: string;
  port: number;
  protocol: 'mqtt' | 'mqtts';
  username?: string;
}

/** Whether a connector has an external broker for the platform to connect to. */
export const isExternal = (c: ConnectorInfo | undefined): c is ConnectorInfo => c?.integration === 'Generic' && typeof c.doc.mqttServer === 'object' && c.doc.mqttServer !== null;

/**
 * The client id of the platform at a connector's broker: stable, so the
 * broker keeps the persistent session (its subscription and the messages
 * queued for it) across reconnects and restarts; 23 characters of [0-9a-z],
 * which every MQTT 3.1.1 broker must accept.
 */
export const clientIdOf = (connectorId: string) => `iotp${createHash('sha256').update(connectorId).digest('hex').slice(0, 19)}`;

/** A topic below one of the platform's own reserved roots (`svc/generic/v2`, …): those secrets name devices of the platform's broker. */
const isPlatformTopic = (topic: string) => ALLOWED_ROOTS.some((root) => topic === root || topic.startsWith(`${root}/`));

export interface ExternalBrokerDeps {
  store: EventStore;
  db: Kysely<Database>;
  log: Logger;
  registry: Registry;
  logs: LogWriter;
  ingest: Pick<Ingest, 'external'>;
  clock?: () => Date;
}

/**
 * The platform as an MQTT client of the external brokers of Generic
 * connectors (`mqttServer`): one connection per connector, opened when the
 * connector is created (or at start) and closed when it is deleted.
 *
 * Uplinks: the connection subscribes to the connector's `uplink.topic` at
 * QoS 1 with a persistent session (`clean: false`, a stable client id), and
 * each message is treated as a publish on a reserved topic: its topic is the
 * secret of its device among the connector's devices, created by its first
 * message. A message is acknowledged (PUBACK) only once the ingest pipeline
 * has stored it, so nothing the broker handed over is lost: a message not yet
 * stored when the connection or the platform goes down is sent again by the
 * broker after the reconnect, with DUP set and its packet id, and the
 * pipeline stores it once (at least once from the broker, once in the store).
 * Messages are taken as they come, as many as the broker's in-flight window
 * allows, and batched by the pipeline like any others; their PUBACKs leave in
 * the order the messages arrived, as MQTT asks.
 *
 * Downlinks: `publish` sends a command's message at QoS 1 and resolves on the
 * broker's PUBACK; a retry of a command whose publish is still in flight
 * waits for it instead of sending again.
 *
 * Health: each connection's state is the connector's `status`
 * (`ConnectorStatusChanged`, reported on change only), with a line in the
 * connector's log; a lost connection is retried with back-off for as long as
 * the connector exists.
 */
export class ExternalBrokers {
  private readonly links = new Map<string, Link>();
  private started = false;

  constructor(
    private readonly deps: ExternalBrokerDeps,
    private readonly options: { reconnectMs?: number[] } = {},
  ) {}

  /** Follows connectors' creations and deletions inside the projection runner, once they are committed. */
  readonly projection: Projection = {
    name: 'external-brokers',
    tables: [],
    apply: async () => {},
    committed: (batch: RecordedEvent[]) => {
      if (!this.started) return;
      for (const e of batch as (RecordedEvent & ConnectorEvent)[]) {
        if (e.type === 'ConnectorCreated' || e.type === 'ConnectorDeleted') this.follow(e.data.id, e.type === 'ConnectorDeleted');
      }
    },
  };

  /** Connects to the brokers of every existing external connector; later ones follow their events. */
  async start(): Promise<void> {
    this.started = true;
    const rows = await this.deps.db.selectFrom('connectors').select('id').execute();
    for (const r of rows) this.follow(r.id, false);
  }

  async stop(): Promise<void> {
    this.started = false;
    const links = [...this.links.values()];
    this.links.clear();
    await Promise.all(links.map((l) => l.close(false)));
  }

  /**
   * Hands a downlink to the connector's broker: resolves on its PUBACK, throws
   * when there is no connection or no acknowledgement within `timeoutMs`.
   */
  async publish(connectorId: string, topic: string, message: string, key: string | undefined, timeoutMs: number): Promise<void> {
    const link = this.links.get(connectorId);
    if (!link) throw new Error('the connector has no connection to an external broker');
    await link.publish(topic, message, key, timeoutMs);
  }

  /** Opens or closes the connector's connection to match the registry (the read models' view of it). */
  private follow(id: string, deleted: boolean): void {
    const connector = this.deps.registry.connector(id);
    const link = this.links.get(id);
    if (isExternal(connector) && !link) {
      this.links.set(id, new Link(connector, this.deps, this.options.reconnectMs ?? RECONNECT_MS));
    } else if (!connector && link) {
      this.links.delete(id);
      void link.close(deleted);
    }
  }
}

/** The connection to one connector's broker. */
class Link {
  private readonly client: MqttClient;
  private readonly url: string;
  private readonly filter: string | null;
  private readonly downlinkRoot: string;
  private readonly clientId: string;
  private attempt = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private lastError: string | null = null;
  /** The health last reported; null before the first connection attempt ends. */
  private reported: 'ok' | 'failing' | null = null;
  /** The broker granted the subscription since this process connected to it. */
  private subscribed = false;
  private reports: Promise<void> = Promise.resolve();
  /** Publishes of commands still waiting for their PUBACK, and those acknowledged lately, by command id. */
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly acknowledged = new RecentMemory<string, true>(10_000);
  /** QoS 1 messages of the current connection, in arrival order, until their PUBACK is sent. */
  private acks: PendingAck[] = [];

  constructor(
    private readonly connector: ConnectorInfo,
    private readonly deps: ExternalBrokerDeps,
    private readonly reconnectMs: number[],
  ) {
    const server = connector.doc.mqttServer as MqttServer;
    this.url = `${server.protocol}://${server.host}:${server.port}`;
    const uplink = (connector.doc.uplink as { topic?: unknown } | undefined)?.topic;
    this.filter = typeof uplink === 'string' ? uplink : null;
    this.downlinkRoot = String((connector.doc.downlink as { topic?: unknown } | undefined)?.topic ?? '').replace(/\/+$/, '');
    this.clientId = clientIdOf(connector.id);
    const options: IClientOptions = {
      protocol: server.protocol,
      host: server.host,
      port: server.port,
      ...(server.protocol === 'mqtts' ? { servername: server.host } : {}),
      clientId: this.clientId,
      // MQTT 3.1.1, which every broker speaks; a persistent session keeps the subscription and queues QoS 1 messages while the platform is away.
      protocolVersion: 4,
      clean: false,
      keepalive: KEEPALIVE_S,
      connectTimeout: CONNECT_TIMEOUT_MS,
      // Reconnection is ours, with back-off; subscriptions are renewed by `connected` when the broker lost the session.
      reconnectPeriod: 0,
      resubscribe: false,
      ...(server.username ? { username: server.username } : {}),
      ...(connector.secrets.mqttPassword !== undefined ? { password: connector.secrets.mqttPassword } : {}),
    };
    this.client = mqtt.connect(options);
    // Called for each message; `take` sends a QoS 1 message's PUBACK itself, once the message is stored.
    this.client.handleMessage = (packet, done) => this.take(packet, done);
    this.client.on('connect', (connack) => this.connected(connack.sessionPresent));
    this.client.on('error', (err) => {
      this.lastError = err.message;
    });
    this.client.on('close', () => {
      // Unacknowledged messages of the closed connection come again on the next one.
      this.acks = [];
      this.lost();
    });
  }

  private get id(): string {
    return this.connector.id;
  }

  private now(): string {
    return (this.deps.clock?.() ?? new Date()).toISOString();
  }

  private connected(sessionPresent: boolean): void {
    this.attempt = 0;
    this.lastError = null;
    if (!this.filter) return this.report('ok');
    // A session the broker kept holds the subscription; subscribing again would make it replay its retained messages.
    if (sessionPresent && this.subscribed) return this.report('ok');
    this.subscribe();
  }

  private subscribe(): void {
    const filter = this.filter!;
    this.client.subscribe(filter, { qos: 1 }, (err, granted) => {
      if (this.closed) return;
      const qos = granted?.[0]?.qos;
      if (err || qos === undefined || qos === 128) {
        this.lastError = `the broker refused the subscription to ${filter}${err ? `: ${err.message}` : ''}`;
        this.report('failing');
        // Asked again with back-off (the broker's rules may change); the connection stays meanwhile for downlinks.
        this.schedule(() => this.client.connected && this.subscribe());
        return;
      }
      this.subscribed = true;
      if (qos === 0) this.connectorLog('warning', `The broker ${this.url} granted QoS 0 on ${filter}: messages sent while the platform is disconnected are not kept for it`);
      this.report('ok');
    });
  }

  private lost(): void {
    if (this.closed) return;
    this.lastError ??= 'the broker closed the connection';
    this.report('failing');
    this.schedule(() => {
      // The stores are kept: downlinks not yet acknowledged are sent again on the new connection.
      this.client.reconnect({ incomingStore: this.client.incomingStore, outgoingStore: this.client.outgoingStore });
    });
  }

  /** Runs `fn` after the next back-off wait, instead of anything scheduled before. */
  private schedule(fn: () => void): void {
    if (this.closed) return;
    if (this.timer) clearTimeout(this.timer);
    const base = this.reconnectMs[Math.min(this.attempt, this.reconnectMs.length - 1)]!;
    this.attempt++;
    this.timer = setTimeout(() => {
      this.timer = null;
      if (!this.closed) fn();
    }, Math.round(base * (0.8 + Math.random() * 0.4)));
    this.timer.unref();
  }

  /**
   * One message from the broker. MQTT.js hands messages over one at a time and
   * waits for `done`; a QoS 1 message is let go at once with `ACK_WHEN_STORED`
   * (so the next can come) and acknowledged by `acked` once stored, or left
   * unacknowledged, for the broker to send again, when it cannot be stored.
   */
  private take(packet: IPublishPacket, done: (error?: Error) => void): void {
    const pending: PendingAck | null = packet.qos > 0 && packet.messageId !== undefined ? { stream: this.client.stream, id: packet.messageId, ready: false } : null;
    if (pending) this.acks.push(pending);
    done(pending ? ACK_WHEN_STORED : undefined);
    const topic = packet.topic;
    // A command on the connector's downlink topics (with MQTT 3.1.1 a subscriber also gets its own publishes) is no device's report.
    if (this.downlinkRoot && (topic === this.downlinkRoot || topic.startsWith(`${this.downlinkRoot}/`))) return this.acked(pending);
    const refuse = (why: string) => {
      const shown = topic.length > 200 ? `${topic.slice(0, 200)}…` : topic;
      this.deps.logs.write({ resourceId: this.id, resourceType: 'connector', type: 'error', priority: 'high', category: 'update', message: `MQTT message on ${shown} not stored: ${why}` }, why);
      this.acked(pending);
    };
    if (isPlatformTopic(topic)) return refuse(`the topic is below ${ALLOWED_ROOTS.find((r) => topic.startsWith(r))}, where the platform's own broker names its devices`);
    // The topic becomes its device's secret, which, like a reserved topic, is at most 1024 bytes.
    if (Buffer.byteLength(topic) > 1024) return refuse('the topic is longer than 1024 bytes, the most a device\'s secret (its topic) may be');
    const payload = typeof packet.payload === 'string' ? Buffer.from(packet.payload) : packet.payload;
    const read = readPayload(topic, payload);
    if ('why' in read) return refuse(read.why);
    this.storing++;
    const stream = this.client.stream;
    if (this.storing === MAX_STORING) {
      // Reading stops here; what MQTT.js has already read is still handed over, in order (TCP holds the rest).
      stream.pause();
      this.connectorLog('info', `Reading from ${this.url} paused: ${MAX_STORING} messages wait to be stored; it goes on as they are`, 'paused');
    }
    this.deps.ingest
      .external({
        connectorId: this.id,
        clientId: this.clientId,
        topic,
        payload: read.body,
        hash: messageHash(topic, payload),
        ...(pending ? { packetId: pending.id } : {}),
        dup: packet.dup === true,
        receivedAt: this.now(),
      })
      .then(
        () => this.acked(pending),
        (err: Error) => {
          // Not stored: no PUBACK for it nor for any later message, and a new connection, on which the broker sends them again.
          if (pending?.stream !== this.client.stream) return;
          this.lastError = `a message could not be stored: ${err.message}`;
          this.acks = [];
          this.client.stream?.destroy();
        },
      )
      .finally(() => {
        if (--this.storing === MAX_STORING / 2 && stream === this.client.stream) stream.resume();
      });
  }

  /** Messages handed to ingest and not yet done with (`MAX_STORING`). */
  private storing = 0;

  /** A message is done with: PUBACKs go out in arrival order, each once every earlier message is done too. */
  private acked(pending: PendingAck | null): void {
    if (!pending) return;
    pending.ready = true;
    while (this.acks[0]?.ready) {
      const next = this.acks.shift()!;
      const stream = this.client.stream;
      if (next.stream === stream && this.client.connected && stream.writable) stream.write(pubAck(next.id));
    }
  }

  async publish(topic: string, message: string, key: string | undefined, timeoutMs: number): Promise<void> {
    if (key && this.acknowledged.has(key)) return;
    let pending = key ? this.inFlight.get(key) : undefined;
    if (!pending) {
      if (!this.client.connected) throw new Error(`not connected to ${this.url}${this.lastError ? `: ${this.lastError}` : ''}`);
      pending = new Promise<void>((resolve, reject) => {
        this.client.publish(topic, message, { qos: 1 }, (err) => (err ? reject(err) : resolve()));
      });
      if (key) {
        this.inFlight.set(key, pending);
        pending.then(
          () => {
            this.inFlight.delete(key);
            this.acknowledged.set(key, true);
          },
          () => this.inFlight.delete(key),
        );
      }
    }
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no acknowledgement from ${this.url} within ${timeoutMs} ms; it is sent again on the next connection`)), timeoutMs);
    });
    try {
      await Promise.race([pending, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Ends the connection; a deleted connector's subscription is removed first, so the broker stops keeping messages for it. */
  async close(deleted: boolean): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const client = this.client;
    if (deleted && client.connected && this.filter) {
      await Promise.race([client.unsubscribeAsync(this.filter).catch(() => undefined), new Promise((r) => setTimeout(r, END_WAIT_MS))]);
    }
    await new Promise<void>((resolve) => {
      if (!client.connected) return client.end(true, {}, () => resolve());
      const force = setTimeout(() => client.end(true, {}, () => resolve()), END_WAIT_MS);
      client.end(false, {}, () => {
        clearTimeout(force);
        resolve();
      });
    });
  }

  /** The connector's health follows the connection; only a change is reported (and logged). */
  private report(status: 'ok' | 'failing'): void {
    if (this.closed || this.reported === status) return;
    const first = this.reported === null;
    this.reported = status;
    const error = status === 'failing' ? `${this.url}: ${this.lastError ?? 'not connected'}` : undefined;
    if (status === 'failing') this.connectorLog('error', `Connection to the external broker failing: ${error}; trying again with back-off`);
    else if (!first) this.connectorLog('info', `Connected again to the external broker ${this.url}`);
    else this.connectorLog('info', `Connected to the external broker ${this.url}${this.filter ? `, subscribed to ${this.filter}` : ''}`);
    const at = this.now();
    const context = { actor: ACTOR, correlationId: `connector:${this.id}`, now: at };
    // In order: a quick failing-then-ok must not be stored as ok-then-failing.
    this.reports = this.reports.then(async () => {
      try {
        await handle(this.deps.store, connectorStream(this.id), connectorDecider, { type: 'ReportStatus', id: this.id, status, ...(error ? { error } : {}), at }, context, { retries: 5 });
      } catch (err) {
        this.deps.log.warn({ err, connectorId: this.id }, 'connector status not recorded');
      }
    });
  }

  private connectorLog(type: 'info' | 'warning' | 'error', message: string, kind = `external broker ${type}`): void {
    this.deps.logs.write({ resourceId: this.id, resourceType: 'connector', type, priority: type === 'info' ? 'low' : 'high', category: 'status', message: message.slice(0, 2000) }, kind);
  }
}
