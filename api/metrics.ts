import { createHash, timingSafeEqual } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Request, RequestHandler } from 'express';
import type { Logger } from 'pino';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { NotFoundError, UnauthorizedError } from '../domain/shared/errors.js';
import type { Lag } from '../domain/eventstore/subscriber.js';
import type { StoreMetrics } from '../domain/eventstore/measured.js';
import type { BrokerMetrics } from '../ingest/broker.js';
import type { IngestMetrics } from '../ingest/pipeline.js';
import type { SandboxStats } from '../sandbox/index.js';
import type { WindowMemoryStats } from '../reactors/calculations/windows.js';
import type { Operation } from './openapi.js';

/**
 * The platform's Prometheus metrics: one registry, built by the composition
 * root when `METRICS_TOKEN` is set (otherwise nothing is measured), and handed
 * to what it measures. Every metric is defined here, so one file lists them
 * all (docs/operations.md explains each).
 *
 * Hot paths (every MQTT message, every translator call) only add to a counter
 * without labels, or to a plain number the component already keeps and that
 * a scrape reads; histograms and labelled series are written per batch, per
 * append or per HTTP request.
 */
export interface Metrics {
  registry: Registry;
  http: Histogram<'method' | 'route' | 'status'>;
  mqtt: BrokerMetrics;
  ingest: IngestMetrics;
  store: StoreMetrics;
  /** What a scrape reads from the running parts, set once they exist. */
  follow(parts: { sandbox?: () => SandboxStats; subscribers?: () => Lagging[]; calculations?: () => WindowMemoryStats }): void;
}

/** A follower of the event log, as the lag metrics see it: `CheckpointedSubscriber`. */
export interface Lagging {
  readonly name: string;
  readonly healthy: boolean;
  lag(): Promise<Lag>;
}

const SECONDS_FAST = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
const SECONDS_HTTP = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export function createMetrics(log: Logger): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const registers = [registry];

  let sandbox: (() => SandboxStats) | null = null;
  let subscribers: (() => Lagging[]) | null = null;
  let calculations: (() => WindowMemoryStats) | null = null;

  const http = new Histogram({
    name: 'platform_http_request_duration_seconds',
    help: 'HTTP requests by method, route template (the OpenAPI path, never the raw path) and status, from arrival to the last byte of the answer.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: SECONDS_HTTP,
    registers,
  });

  const mqtt: BrokerMetrics = {
    connections: new Gauge({ name: 'platform_mqtt_connections', help: 'Open MQTT connections by transport (tcp, tls, ws), logged in or not yet.', labelNames: ['transport'] as const, registers }),
    received: new Counter({ name: 'platform_mqtt_messages_received_total', help: 'PUBLISH packets received from MQTT clients (before the topic rules decide on them).', registers }),
    sent: new Counter({ name: 'platform_mqtt_messages_sent_total', help: 'PUBLISH packets the broker delivered to subscribed clients (output topics, downlinks).', registers }),
    tlsRefused: new Counter({ name: 'platform_mqtt_tls_handshakes_refused_total', help: 'TLS handshakes on the MQTT TLS port that failed (an untrusted certificate, no TLS, an old protocol version).', registers }),
    sessionDrops: new Counter({ name: 'platform_mqtt_session_messages_dropped_total', help: 'Messages dropped from persistent sessions whose queue was full (MQTT_SESSION_QUEUE_LIMIT), oldest first; in a cluster counted by the node that queued the message.', registers }),
    sessionsExpired: new Counter({ name: 'platform_mqtt_sessions_expired_total', help: 'Persistent sessions ended because their client was away longer than MQTT_SESSION_EXPIRY_SECONDS; in a cluster counted by the node that ended them.', registers }),
  };

  const ingest: IngestMetrics = {
    batchSize: new Histogram({ name: 'platform_ingest_batch_messages', help: 'Messages per ingest batch (appended to the event store in one statement).', buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000], registers }),
    batchSeconds: new Histogram({ name: 'platform_ingest_batch_duration_seconds', help: 'Time an ingest batch takes: decoding, the append, the acknowledgements.', buckets: SECONDS_FAST, registers }),
    latency: new Histogram({ name: 'platform_ingest_latency_seconds', help: 'Per batch, the wait of its oldest message: from arrival at the pipeline to its acknowledgement (PUBACK).', buckets: SECONDS_FAST, registers }),
    messages: new Counter({ name: 'platform_ingest_messages_total', help: 'Ingested messages by outcome: stored, answered (a re-send, or dropped on purpose, or refused and logged), failed (not stored; the publisher sends again).', labelNames: ['outcome'] as const, registers }),
  };

  const store: StoreMetrics = {
    appendSeconds: new Histogram({ name: 'platform_eventstore_append_duration_seconds', help: 'Event-store appends (one stream, or many streams at once for ingest batches), including their commit.', labelNames: ['operation'] as const, buckets: SECONDS_FAST, registers }),
  };

  /** A counter copied at each scrape from counts a running part keeps itself (plain numbers, no cost per event here). */
  const countedBy = (name: string, help: string, label: string, read: () => Record<string, number> | null) =>
    new Counter({
      name,
      help,
      labelNames: [label],
      registers,
      collect() {
        const counts = read();
        if (!counts) return;
        this.reset();
        for (const [value, count] of Object.entries(counts)) this.inc({ [label]: value }, count);
      },
    });
  /** A gauge set at each scrape from a running part; left unset until the part is followed. */
  const readFrom = (name: string, help: string, read: () => number | null) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        const value = read();
        if (value !== null) this.set(value);
      },
    });

  countedBy('platform_sandbox_calls_total', 'Translator calls (decode, chain, encode) by outcome: ok, timeout (past the call deadline), error (any other failure of the translator).', 'outcome', () => {
    if (!sandbox) return null;
    const s = sandbox();
    return { ok: s.calls - s.timeouts - s.failures, timeout: s.timeouts, error: s.failures };
  });
  readFrom('platform_sandbox_contexts', 'Translator contexts alive (warm in a pool, lent to a call, or being built), across every loaded translator.', () => sandbox?.().contexts ?? null);
  readFrom('platform_sandbox_translators', 'Translator versions loaded, each with its pool of warm contexts.', () => sandbox?.().programs ?? null);

  countedBy('platform_calculation_window_runs_total', 'Runs of window calculations by where their readings came from: memory (the windows the reactor keeps), database (an aggregate over device_history).', 'source', () => {
    if (!calculations) return null;
    const { runs } = calculations();
    return { memory: runs.memory, database: runs.database };
  });
  readFrom('platform_calculation_window_readings', 'Readings the calculations reactor keeps in memory for onChange windows (at most CALCULATION_WINDOW_READINGS).', () => calculations?.().readings ?? null);
  readFrom('platform_calculation_window_series', 'Device fields whose windows the calculations reactor keeps in memory.', () => calculations?.().series ?? null);

  // Lag is measured against the store at each scrape, so a subscriber that is stuck shows a growing lag.
  // The registry reads the gauges one after another, starting each one's collect in order: the three share
  // one measurement, which each awaits, so none shows what the previous scrape measured.
  let measuring: Promise<{ name: string; healthy: boolean; lag: Lag | null }[]> | null = null;
  const measure = () =>
    (measuring ??= (async () => {
      try {
        return await Promise.all(
          (subscribers?.() ?? []).map(async (s) => {
            const healthy = s.healthy;
            try {
              return { name: s.name, healthy, lag: await s.lag() };
            } catch (err) {
              // The store does not answer: the lag series are left out of this scrape, and `up` says why.
              log.warn({ err, subscriber: s.name }, 'the lag of a subscriber could not be measured');
              return { name: s.name, healthy, lag: null };
            }
          }),
        );
      } finally {
        measuring = null;
      }
    })());
  const lagGauges: [name: string, help: string, of: (lag: Lag) => number][] = [
    ['platform_subscriber_lag_events', 'Events stored but not yet handled, per subscriber of the event log (projections, reactors); counted up to 1,000,000.', (lag) => lag.events],
    ['platform_subscriber_lag_seconds', 'Age of the oldest event not yet handled, per subscriber (0 when it has handled everything).', (lag) => lag.seconds],
  ];
  for (const [name, help, of] of lagGauges) {
    new Gauge({
      name,
      help,
      labelNames: ['subscriber'] as const,
      registers,
      async collect() {
        const measured = await measure();
        this.reset();
        for (const m of measured) if (m.lag) this.set({ subscriber: m.name }, of(m.lag));
      },
    });
  }
  new Gauge({
    name: 'platform_subscriber_up',
    help: 'Per subscriber: 1 when it runs and its last batch did not fail, else 0.',
    labelNames: ['subscriber'] as const,
    registers,
    async collect() {
      const measured = await measure();
      this.reset();
      for (const m of measured) this.set({ subscriber: m.name }, m.healthy ? 1 : 0);
    },
  });

  return {
    registry,
    http,
    mqtt,
    ingest,
    store,
    follow(parts) {
      if (parts.sandbox) sandbox = parts.sandbox;
      if (parts.subscribers) subscribers = parts.subscribers;
      if (parts.calculations) calculations = parts.calculations;
    },
  };
}

/** The same digest for equal tokens; compared with `timingSafeEqual`, whatever the lengths. */
const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * `GET /metrics`: the registry in Prometheus' text format, for a caller with
 * `Authorization: Bearer <METRICS_TOKEN>` (compared in constant time);
 * without the token 401, and 404 while metrics are off.
 */
export function metricsRoute(token: string | null, metrics: Metrics | null): RequestHandler {
  if (token === null || metrics === null) return (_req, _res, next) => next(new NotFoundError());
  const expected = digest(token);
  return async (req, res, next) => {
    const given = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!timingSafeEqual(digest(given), expected)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
      return next(new UnauthorizedError());
    }
    try {
      const text = await metrics.registry.metrics();
      res.setHeader('Cache-Control', 'no-store');
      res.type(metrics.registry.contentType).send(text);
    } catch (err) {
      next(err);
    }
  };
}

/** The paths outside the OpenAPI document that the platform answers itself. */
const FIXED = ['/api/openapi.json', '/api/docs', '/metrics'];

/** Times one request under `route` (an OpenAPI path template or a fixed name), from now to the last byte of its answer. */
export type RequestTimer = (req: IncomingMessage, res: ServerResponse, route: string) => void;

/**
 * The timer of `platform_http_request_duration_seconds`: each request once,
 * so one that the direct way in took and then handed on to the full pipeline
 * counts once, from its arrival.
 */
export function requestTimer(requests: Metrics['http']): RequestTimer {
  const timed = new WeakSet<IncomingMessage>();
  return (req, res, route) => {
    if (timed.has(req)) return;
    timed.add(req);
    const started = performance.now();
    res.once('finish', () => {
      requests.observe({ method: req.method ?? '', route, status: String(res.statusCode) }, (performance.now() - started) / 1000);
    });
  };
}

/**
 * Times every request, labelled by the document's path template
 * (`/api/iotnodes/{id}`), so label values stay bounded whatever paths clients
 * send: a path of no operation is `unmatched`, a control-panel page or asset
 * is `panel`.
 */
export function timeRequests(time: RequestTimer, operationOf: (method: string, path: string) => Operation | null): RequestHandler {
  const routeOf = (req: Request): string => {
    const operation = operationOf(req.method, req.path);
    if (operation) return operation.template;
    const fixed = FIXED.find((p) => req.path === p || req.path.startsWith(`${p}/`));
    if (fixed) return fixed;
    return /^\/(api|mqtt)(\/|$)/.test(req.path) ? 'unmatched' : 'panel';
  };
  return (req, res, next) => {
    time(req, res, routeOf(req));
    next();
  };
}
