import type { Server as HttpServer } from 'node:http';
import { messageHash } from './payload.js';
import { UnavailableError } from '../domain/shared/errors.js';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { EventStore } from '../domain/eventstore/port.js';
import type { Database } from '../projections/database.js';
import { purgeExpiredLogs } from '../projections/logs.js';
import { Registry } from './registry.js';
import { IngestPipeline, dedupKey, type PipelineOptions } from './pipeline.js';
import { LogWriter } from '../domain/logs/writer.js';
import { startBroker, type Broker, type BrokerOptions } from './broker.js';

/**
 * The inbound data path: the registry the broker decides with, the ingest
 * pipeline and the broker. Built in two steps: `createIngest` before the
 * projection runner starts (its registry projection runs inside the runner),
 * `start` once the read models have caught up. What goes out again (output
 * topics, channels, downlinks) is in `reactors/`.
 */
export interface Ingest {
  registry: Registry;
  logs: LogWriter;
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  /** Set once started. */
  broker: Broker | null;
  /**
   * A report for a known device from outside the broker (a network server's
   * uplink): through the same pipeline as MQTT, decoded by the device's
   * translators; resolves once stored (or recognised as a repeat by `dedupKey`).
   */
  report(r: { deviceId: string; connectorId: string; topic: string; payload: Record<string, unknown>; receivedAt: string; correlationId: string; dedupKey: string }): Promise<void>;
  /**
   * A message of a Generic connector's external broker, checked at the edge
   * (`readPayload`): treated as a publish on a reserved topic is, among the
   * connector's devices (the one whose secret is the topic, created by its
   * first message). `packetId` and `dup` recognise the broker's re-send of a
   * message already stored. Resolves once stored (or answered without
   * storing: a re-send, a refusal logged on the connector); rejects when it
   * cannot be stored now.
   */
  external(m: { connectorId: string; clientId: string; topic: string; payload: Record<string, unknown>; hash: string; packetId?: number; dup: boolean; receivedAt: string }): Promise<void>;
  start(options: { mqttPort: number; httpServer?: HttpServer; jwtSecret: string; clock?: () => Date } & Pick<BrokerOptions, 'tls' | 'metrics' | 'sync' | 'backends' | 'sessions' | 'stallMs'>): Promise<Broker>;
  /**
   * The first step of a stop: the broker takes no new connection and no new PUBLISH; what the pipeline was
   * given is stored and acknowledged on the connections, which stay open, by `deadline` at the latest.
   * Answers false when the pipeline had not stored everything by then.
   */
  drain(deadline: number): Promise<boolean>;
  /** Ends the MQTT connections (after what was written to them) and the pipeline (what it still holds is stored first, until `deadline`). */
  stop(deadline?: number): Promise<void>;
}

/** How long a stop waits for the pipeline's last batch by default. */
const STOP_WAIT_MS = 5000;

/** Whether `work` settled by `deadline` (it goes on, unawaited, if not). */
const within = (work: Promise<unknown>, deadline: number): Promise<boolean> => {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    work.then(() => true, () => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now())))),
  ]).finally(() => clearTimeout(timer));
};

export async function createIngest(store: EventStore, db: Kysely<Database>, log: Logger, options: PipelineOptions = {}): Promise<Ingest> {
  const registry = new Registry();
  await registry.load(db);
  const logs = new LogWriter(store, log);
  const pipeline = new IngestPipeline(store, db, registry, logs, log, options);
  let purge: NodeJS.Timeout | null = null;

  const ingest: Ingest = {
    registry,
    logs,
    exclusive: (fn) => pipeline.exclusive(fn),
    report: (r) =>
      new Promise<void>((resolve, reject) => {
        const hash = messageHash(r.topic, JSON.stringify(r.payload));
        pipeline.submit({
          kind: 'device',
          deviceId: r.deviceId,
          connectorId: r.connectorId,
          topic: r.topic,
          payload: r.payload,
          receivedAt: r.receivedAt,
          correlationId: r.correlationId,
          dedup: { key: r.dedupKey, hash, redelivery: true },
          done: (err) => (err ? reject(new UnavailableError('ERR - the uplink could not be stored now; send it again')) : resolve()),
        });
      }),
    external: (m) =>
      new Promise<void>((resolve, reject) => {
        pipeline.submit({
          kind: 'external',
          connectorId: m.connectorId,
          topic: m.topic,
          payload: m.payload,
          receivedAt: m.receivedAt,
          correlationId: `mqtt:${m.hash}:${m.packetId ?? '-'}:${m.clientId}`,
          // The broker re-sends an unacknowledged message with DUP set and its packet id; a packet id without DUP is a new message.
          dedup: m.packetId !== undefined ? { key: dedupKey(m.connectorId, m.clientId, m.packetId), hash: m.hash, redelivery: m.dup } : undefined,
          done: (err) => (err ? reject(err) : resolve()),
        });
      }),
    broker: null,
    async start({ mqttPort, httpServer, jwtSecret, tls, metrics, clock, backends, sync, sessions, stallMs }) {
      await pipeline.seed();
      const broker = await startBroker({ port: mqttPort, tls, httpServer, registry, pipeline, logs, log, db, jwtSecret, metrics, clock, sessions, stallMs, ...(backends ? { backends } : {}), ...(sync ? { sync } : {}) });
      ingest.broker = broker;
      purge = setInterval(() => {
        purgeExpiredLogs(db).catch((err) => log.error({ err }, 'purging expired log entries failed'));
      }, 60_000);
      purge.unref();
      return broker;
    },
    async drain(deadline) {
      ingest.broker?.stopTaking();
      const drained = await within(pipeline.drain(), deadline);
      await ingest.broker?.written(deadline);
      return drained;
    },
    async stop(deadline = Date.now() + STOP_WAIT_MS) {
      if (purge) clearInterval(purge);
      await ingest.broker?.close(deadline);
      if (!(await within(pipeline.close(), deadline))) log.warn('stopping: the ingest batch under way did not finish in time; its publishers send it again');
    },
  };
  return ingest;
}
