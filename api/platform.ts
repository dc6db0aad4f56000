import { Locks } from './locks.js';
import { FenceGeometry } from './geofences/postgis.js';
import { compileTemplateRules } from './dashboards/rules.js';
import { createServer, type Server } from 'node:http';
import { outboundFetch } from '../reactors/outbound.js';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { Logger } from 'pino';
import { sessionLimits, type Config } from './config.js';
import type { Deps } from './deps.js';
import { createApp } from './app.js';
import { loadOpenApi } from './openapi.js';
import { authRoutes } from './auth/routes.js';
import { Principals } from '../projections/principals.js';
import { bootstrapAdmin } from './users/create.js';
import { userRoutes } from './users/routes.js';
import { roleRoutes } from './access/roles.js';
import { accessRightRoutes } from './access/rights.js';
import { usergroupRoutes } from './usergroups/routes.js';
import { geofenceRoutes } from './geofences/routes.js';
import { dashboardRoutes } from './dashboards/routes.js';
import { imageRoutes, imageUploadParser } from './images/routes.js';
import { startPrivateCluster, type PrivateCluster } from '../migrations/cluster.js';
import { migrateToLatest } from '../migrations/index.js';
import { createPostgresStore } from '../domain/eventstore/postgres.js';
import { createEsdbStore } from '../domain/eventstore/esdb.js';
import type { EventStore } from '../domain/eventstore/port.js';
import { versioned } from '../domain/eventstore/versioned.js';
import { readingThrough } from '../domain/eventstore/readingThrough.js';
import { ProjectionRunner } from '../projections/runner.js';
import { allProjections } from '../projections/index.js';
import type { Database } from '../projections/database.js';
import { createIngest } from '../ingest/index.js';
import { deviceRoutes } from './devices/routes.js';
import { credentialsRoutes } from './credentials/routes.js';
import { channelRoutes } from './channels/routes.js';
import { connectorRoutes } from './connectors/routes.js';
import { COMMAND_WAIT_MS, commandRoutes } from './commands/routes.js';
import { integrationRoutes } from './integrations/routes.js';
import { logRoutes } from './logs/routes.js';
import { createSandbox, TimeoutBudget } from '../sandbox/index.js';
import { Translation } from '../ingest/translate.js';
import { translatorRoutes } from './translators/routes.js';
import { uplinkRoutes } from './translators/uplinks.js';
import { GeofenceTracking } from '../reactors/geofences/tracking.js';
import { MqttOutput } from '../reactors/channels/mqtt.js';
import { HttpChannels } from '../reactors/channels/http.js';
import { ChannelAccess } from '../reactors/channels/access.js';
import { COMMAND_RETRY, CommandDelivery, type CommandRetry } from '../reactors/commands/delivery.js';
import { ExternalBrokers } from '../reactors/integrations/generic/external.js';
import { panelRoutes } from './web.js';
import { startCluster, type ClusterNode } from './cluster.js';
import { HttpDrain } from './drain.js';
import { liveChannelRoutes } from './channels/live.js';
import { createMetrics, metricsRoute , type Lagging } from './metrics.js';
import { measuredStore } from '../domain/eventstore/measured.js';
import { readsHeldBackBy } from '../domain/eventstore/horizon.js';
import { STALLED_MS, type CheckpointedSubscriber, type Lag, type SubscriberState } from '../domain/eventstore/subscriber.js';
import { ruleRoutes } from './rules/routes.js';
import { deviceCommands } from './commands/send.js';
import { RulesReactor } from '../reactors/rules/index.js';
import { locationRoutes } from './locations/routes.js';
import { organizationRoutes } from './organizations/routes.js';
import { appRoutes } from './apps/routes.js';
import { appFilterRoutes } from './usergroups/appFilter.js';
import { calculationRoutes } from './calculations/routes.js';
import { CalculationReactor } from '../reactors/calculations/reactor.js';
import { auditRoutes } from './audit/routes.js';

/** How long health waits for the database (and EventStoreDB) to answer before it reports them down. */
const HEALTH_CHECK_MS = 2000;
/** How long one measurement of the subscribers' lag serves health (a load balancer, and several, may ask often). */
const LAG_REUSE_MS = 1000;
/** The store's reads held back by one transaction for this long are named in health and the log. */
const HELD_BACK_SECONDS = 5;
/** How often the log is told about a transaction holding the store's reads back. */
const HORIZON_CHECK_MS = 5000;

export interface Platform {
  /** What ingest, the read models and the reactors are built from. */
  deps: Deps;
  /** What the HTTP routes are built from: `deps` with the HTTP front's own database connections (`PoolBounds`). */
  served: Deps;
  /** The HTTP address actually bound (PORT=0 picks a free port). */
  httpPort: number;
  /** The MQTT address actually bound (MQTT_PORT=0 picks a free port). */
  mqttPort: number;
  /** The MQTT over TLS port bound; null when TLS is off. */
  mqttTlsPort: number | null;
  /** The ingest decode stage: translator resolution and calls. */
  translation: Translation;
  /** Resolves once every log entry of the data path written so far (ingest's, the translations') is appended to the store. */
  logsWritten(): Promise<void>;
  stop(): Promise<void>;
}

/** Request headers cap: above Node's 16 KiB default so a geoquery at its position cap fits. */
export const MAX_HEADER_BYTES = 64 * 1024;

// The bigint read-model columns (revisions, counts) fit in a JS number.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

/** Opens the database: the one in DATABASE_URL, or the private cluster under DATA_DIR. */
export function openDatabase(config: Config, log: Logger): { url: string; cluster: PrivateCluster | null } {
  if (config.databaseUrl) return { url: config.databaseUrl, cluster: null };
  const cluster = startPrivateCluster(join(config.dataDir, 'postgres'), 'platform', { log: (line) => log.info(line) });
  return { url: cluster.url('platform'), cluster };
}

/**
 * The connection pool. A connection that breaks while it is checked out (inside a transaction, when
 * PostgreSQL restarts) fails its queries and is dropped when released; without a listener of its own,
 * its 'error' event would end the process.
 *
 * JIT compilation is off on every connection. The platform's statements are short reads and writes on
 * indexes, and the planner's row estimates for `es.events` by stream follow its largest streams (a
 * device's thousands of reports): a read of a few two-event streams was costed above JIT's threshold and
 * spent 5–8 ms compiling for 0.5 ms of work.
 *
 * Every connection is also bounded on the server's side, so a transaction whose client is gone never
 * outlives it by long: the server probes a silent client over TCP (5 s idle, then 3 probes 2 s apart, as
 * the leadership connection does, so a vanished node's batch transaction ends with its locks), and ends a
 * session that stays idle inside a transaction for `IDLE_IN_TRANSACTION_MS` (a client alive but stuck).
 * No transaction of the platform waits on its client that long: each runs its statements back to back.
 * The connections carry the node's name (`application_name`, `platform <name>`), so `pg_stat_activity`
 * says whose they are. An `options` parameter in DATABASE_URL comes after these settings, so what it
 * names wins.
 */
export function openPool(url: string, max: number, log: Logger, name = 'platform', bounds: PoolBounds = {}): pg.Pool {
  const { connectionString, options } = withOptions(url, `-c jit=off ${SERVER_KEEPALIVES}`);
  const pool = new pg.Pool({
    connectionString,
    max,
    options,
    application_name: name.slice(0, 63),
    idle_in_transaction_session_timeout: IDLE_IN_TRANSACTION_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: 5000,
    ...(bounds.statementTimeoutMs ? { statement_timeout: bounds.statementTimeoutMs } : {}),
    ...(bounds.connectWaitMs ? { connectionTimeoutMillis: bounds.connectWaitMs } : {}),
  });
  pool.on('error', (err) => log.error({ err }, 'idle database connection failed'));
  pool.on('connect', (client) => client.on('error', (err) => log.warn({ err: err.message }, 'a database connection in use failed')));
  return pool;
}

/** What a pool serving requests bounds: each statement's time on the server, and the wait for a connection (one free in the pool, or a new one). */
export interface PoolBounds {
  statementTimeoutMs?: number;
  connectWaitMs?: number;
}

/**
 * The HTTP front's own connections. A slow read (a long history, a broad geoquery, a lock it waits on) holds one of
 * these, never one of the ingest pipeline's, the read models' or the reactors': a flood of such requests answers 503
 * while devices' data goes on being stored. It has `HTTP_DATABASE_CONNECTIONS` connections; their statements end after `HTTP_STATEMENT_TIMEOUT_MS`, and a request
 * that waits longer than `HTTP_CONNECT_WAIT_MS` for a connection gets 503 too, instead of queueing without end.
 */
export const HTTP_CONNECT_WAIT_MS = 10_000;
/** Connections that hold the named locks of HTTP writes (`api/locks.ts`): one per name in use at a time. */
export const LOCK_CONNECTIONS = 4;

/** How long a session may stay idle inside a transaction before the server ends it (and rolls the transaction back). */
export const IDLE_IN_TRANSACTION_MS = 30_000;

/** The server's TCP keepalives for a session: a client that vanished is found within about 11 s. */
export const SERVER_KEEPALIVES = '-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=3';

/** The connection string without its `options` parameter, and `ours` followed by those options (the later setting wins). */
function withOptions(url: string, ours: string): { connectionString: string; options: string } {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { connectionString: url, options: ours };
  }
  const theirs = parsed.searchParams.get('options');
  if (theirs === null) return { connectionString: url, options: ours };
  parsed.searchParams.delete('options');
  return { connectionString: parsed.toString(), options: `${ours} ${theirs}` };
}

/** What `work` gives within `ms`; null when it fails or takes longer. */
function settledWithin<T>(work: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([work.catch(() => null), new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), ms)))]).finally(() => clearTimeout(timer));
}

/** JWT_SECRET, or one generated on first start and kept in DATA_DIR. */
function jwtSecret(config: Config): string {
  if (config.jwtSecret) return config.jwtSecret;
  const file = join(config.dataDir, 'jwt-secret');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  mkdirSync(config.dataDir, { recursive: true });
  const secret = randomBytes(48).toString('base64url');
  writeFileSync(file, secret + '\n', { mode: 0o600 });
  return secret;
}

/** What the environment cannot set: the clock (tests set it to put reports at chosen times). */
export interface PlatformOptions {
  clock?: () => Date;
  /** How many stored QoS 1 messages ingest remembers in this process (tests make it small to see what a node does once it has forgotten one). */
  redeliveryMemory?: number;
  /** How long a stop lets HTTP requests under way finish, and then the ingest pipeline store what it was given (`STOP_GRACE_MS`). */
  stopGraceMs?: number;
  /** Aborted: a start under way stops at its next step, stopping what it had started (a signal during start). */
  signal?: AbortSignal;
  /** Command delivery's retry schedule and call time-out, over `COMMAND_RETRY` (tests shorten the waits between attempts). */
  commandRetry?: Partial<CommandRetry>;
  /** How long a command request waits for the network server's answer before it answers 202 `pending` (`COMMAND_WAIT_MS`). */
  commandWaitMs?: number;
  /** How long a follower's batch may be under way before health says it is not up (`STALLED_MS`). */
  stalledMs?: number;
  /** How long a transaction may hold the store's reads back before health and the log name it (`HELD_BACK_SECONDS`). */
  heldBackSeconds?: number;
  /** How often the log is told about such a transaction (`HORIZON_CHECK_MS`). */
  horizonCheckMs?: number;
  /**
   * The longest the rules' schedule waits before it looks at the clock again (60 s): a `clock` a test moves
   * forward reaches the schedule's next slot within it.
   */
  scheduleMaxWaitMs?: number;
}

/**
 * How long a stop lets the HTTP requests under way finish (a REST write waits up to `PROJECTION_WAIT_MS` for the
 * read models), and then the ingest pipeline store and acknowledge the messages it was given.
 */
export const STOP_GRACE_MS = 10_000;

/** The composition root: every dependency is built and wired here, once. */
export async function startPlatform(config: Config, log: Logger, options: PlatformOptions = {}): Promise<Platform> {
  // What has started, to be stopped in reverse order: on stop(), or at once when a later step of start fails,
  // so a failed start never leaves a private cluster or a port behind.
  const started: (() => unknown)[] = [];
  const stopAll = async () => {
    for (const stop of started.splice(0).reverse()) {
      try {
        await stop();
      } catch (err) {
        log.error({ err }, 'stopping a part of the platform failed');
      }
    }
  };
  try {
    const database = openDatabase(config, log);
    started.push(() => database.cluster?.stop());
    const pool = openPool(database.url, 20, log, `platform ${config.nodeName}`);
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    started.push(() => db.destroy());
    const step = () => options.signal?.throwIfAborted();
    step();
    await sql`CREATE EXTENSION IF NOT EXISTS postgis`.execute(db);
    await migrateToLatest(db);
    step();

    // Metrics only when someone may read them: without METRICS_TOKEN nothing is measured.
    const metrics = config.metricsToken ? createMetrics(log) : null;
    const engine: EventStore = versioned(config.eventstoreUrl ? createEsdbStore(config.eventstoreUrl) : createPostgresStore(pool));
    const store = metrics ? measuredStore(engine, metrics.store) : engine;
    started.push(() => store.close());
    // REDIS_URL: one node of a cluster (api/cluster.ts); otherwise the single process, which leads everything.
    const cluster: ClusterNode | null = config.redisUrl ? await startCluster(config, database.url, db, store, log) : null;
    if (cluster) started.push(() => cluster.stop());
    // The broker's in-memory registry follows the events inside the projection runner, so REST writes are visible to MQTT when they return.
    // One translator sandbox per process; its index follows uploads and device preferences inside the projection runner.
    const sandbox = createSandbox();
    started.push(() => sandbox.dispose());
    const translation = new Translation(store, db, sandbox, log, new TimeoutBudget());
    await translation.load();
    const ingest = await createIngest(store, db, log, {
      decoder: translation,
      metrics: metrics?.ingest,
      memory: options.redeliveryMemory,
      ...(cluster ? { redeliveries: cluster.redis.redeliveries } : {}),
    });
    const principals = new Principals(db);
    // Generic connectors' external brokers: connections follow the connectors' events, once committed.
    const externalBrokers = new ExternalBrokers({ store, db, log, registry: ingest.registry, logs: ingest.logs, ingest });
    // The node's in-memory indexes: inside the runner on a single process; on a follower of their own on each node of a cluster.
    const indexes = [ingest.registry.projection, translation.projection, principals.projection, externalBrokers.projection];
    const projections = cluster ? await cluster.runner(allProjections(), indexes) : new ProjectionRunner(store, db, [...allProjections(), ...indexes], log);
    started.push(() => projections.stop());
    step();
    await projections.start();
    step();

    // HTTP requests read and lock through connections of their own, bounded in time (`PoolBounds`); writes append through the store as everywhere.
    const httpPool = openPool(database.url, config.httpConnections, log, `platform ${config.nodeName} http`, { statementTimeoutMs: config.httpStatementTimeoutMs, connectWaitMs: HTTP_CONNECT_WAIT_MS });
    const httpDb = new Kysely<Database>({ dialect: new PostgresDialect({ pool: httpPool }) });
    started.push(() => httpDb.destroy());
    const lockPool = openPool(database.url, LOCK_CONNECTIONS, log, `platform ${config.nodeName} locks`, { statementTimeoutMs: config.httpStatementTimeoutMs, connectWaitMs: HTTP_CONNECT_WAIT_MS });
    const lockDb = new Kysely<Database>({ dialect: new PostgresDialect({ pool: lockPool }) });
    started.push(() => lockDb.destroy());
    const locks = new Locks(lockDb, (position, ms) => projections.waitFor(position, ms), log, HTTP_CONNECT_WAIT_MS);
    const deps: Deps = { locks, config, db, store, projections, log, clock: options.clock ?? (() => new Date()), jwtSecret: jwtSecret(config), principals, cluster: cluster?.subscribers ?? null, outbound: outboundFetch(config.outboundTargets) };
    await bootstrapAdmin(deps);
    step();
    // With the PostgreSQL store, what requests read of the event log (the audit log, a stream before a write) goes through those connections too.
    const served: Deps = { ...deps, db: httpDb, store: store.kind === 'postgres' ? readingThrough(store, versioned(createPostgresStore(httpPool))) : store };

    // The HTTP server, with what lets a stop finish the requests under way (`HttpDrain`) ahead of the application.
    // 64 KiB of headers: a geoquery ring of 1,000 positions (the documented cap) fits in the query string.
    const server: Server = createServer({ maxHeaderSize: MAX_HEADER_BYTES });
    const front = new HttpDrain(server);

    // Every follower of the log this process runs (the projection runner, then each reactor as it starts), for health.
    const followers: CheckpointedSubscriber<Database>[] = [projections.subscriber];
    let lastLag: { at: number; states: Promise<Record<string, SubscriberState & { lag?: Lag }>> } | null = null;
    /** Each follower's state, with its lag where it runs here; a lag the store does not give within `HEALTH_CHECK_MS` is left out. */
    const subscriberStates = () => {
      if (lastLag && Date.now() - lastLag.at < LAG_REUSE_MS) return lastLag.states;
      const states = Promise.all(
        followers.map(async (f) => {
          const state = f.state(Date.now(), options.stalledMs ?? STALLED_MS);
          const lag = state.role === 'leading' ? await settledWithin(f.lag(), HEALTH_CHECK_MS) : null;
          return [f.name, { ...state, ...(lag ? { lag: { events: lag.events, seconds: Math.round(lag.seconds * 10) / 10 } } : {}) }] as const;
        }),
      ).then((entries) => Object.fromEntries(entries));
      lastLag = { at: Date.now(), states };
      return states;
    };
    // The PostgreSQL store's reads stop before the oldest transaction still open on the server: one left open holds every follower back.
    const heldBackSeconds = options.heldBackSeconds ?? HELD_BACK_SECONDS;
    const heldBack = () => (store.kind === 'postgres' ? settledWithin(readsHeldBackBy(db, heldBackSeconds), HEALTH_CHECK_MS) : Promise.resolve(null));
    if (store.kind === 'postgres') {
      let told: string | null = null;
      const watch = setInterval(() => {
        readsHeldBackBy(db, heldBackSeconds).then((holder) => {
          const who = holder && `${holder.pid ?? holder.prepared}`;
          if (holder && who !== told) log.warn({ holder }, 'the event store\'s reads are held back by a transaction left open on the PostgreSQL server: the read models and the reactors wait for it to end');
          else if (!holder && told) log.info('the event store\'s reads go on: the transaction that held them back has ended');
          told = who;
        }, () => undefined);
      }, options.horizonCheckMs ?? HORIZON_CHECK_MS);
      watch.unref();
      started.push(() => clearInterval(watch));
    }

    const openapi = loadOpenApi();
    const geometry = new FenceGeometry(openapi);
    const integrations = integrationRoutes(served, ingest);
    const app = createApp(served, openapi, {
      parsers: [imageUploadParser()],
      panel: panelRoutes(),
      direct: [integrations.direct],
      metrics: { route: metricsRoute(config.metricsToken, metrics), requests: metrics?.http ?? null },
      routers: [authRoutes(served), userRoutes(served), roleRoutes(served), accessRightRoutes(served), usergroupRoutes(served), dashboardRoutes(served, compileTemplateRules(openapi)), imageRoutes(served), geofenceRoutes(served, geometry), commandRoutes(served, ingest.registry, openapi, translation, options.commandWaitMs ?? COMMAND_WAIT_MS), deviceRoutes(served, ingest, geometry), credentialsRoutes(served), connectorRoutes(served), integrations.router, channelRoutes(served), liveChannelRoutes(served), logRoutes(served), translatorRoutes(served, sandbox, translation, new TimeoutBudget()), uplinkRoutes(served, ingest, translation), ruleRoutes(served, openapi, ingest.registry), locationRoutes(served), organizationRoutes(served), appRoutes(served), appFilterRoutes(served), calculationRoutes(served), auditRoutes(served)],
      health: async () => {
        // A database that neither answers nor refuses (a pool waiting on dead connections) counts as down after
        // HEALTH_CHECK_MS, so health always answers and says what the node waits for.
        const within = (check: Promise<unknown>) =>
          Promise.race([check.then(() => true, () => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(false), HEALTH_CHECK_MS).unref())]);
        const [dbUp, storeUp, subscribers, holder] = await Promise.all([
          within(sql`SELECT 1`.execute(db)),
          // The PostgreSQL store lives in the same database; EventStoreDB is a server of its own.
          store.kind === 'postgres' ? Promise.resolve(true) : within(store.readAll({ limit: 1 })),
          subscriberStates(),
          heldBack(),
        ]);
        const node = cluster?.health();
        const ready = dbUp && storeUp && projections.healthy && (node?.ready ?? true) && !front.stopping;
        return {
          ready,
          stopping: front.stopping,
          degraded: (node?.degraded.length ?? 0) > 0,
          detail: {
            database: dbUp,
            eventStore: { kind: store.kind, up: storeUp, ...(holder ? { readsHeldBackBy: holder } : {}) },
            projections: projections.healthy,
            parkedEvents: projections.parked + (node?.parked ?? 0),
            subscribers,
            ...(node ? { cluster: node.detail } : {}),
          },
        };
      },
    });

    server.on('request', app);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, () => resolve());
    });
    // At a stop, after the front door below has drained and the reactors have stopped: the connections left are cut.
    started.push(() => front.close());
    started.push(() => ingest.stop());
    const tls = config.mqttTls && { port: config.mqttTls.port, cert: readFileSync(config.mqttTls.certFile, 'utf8'), key: readFileSync(config.mqttTls.keyFile, 'utf8') };
    const broker = await ingest.start({ mqttPort: config.mqttPort, tls, httpServer: server, jwtSecret: deps.jwtSecret, metrics: metrics?.mqtt, clock: deps.clock, sessions: sessionLimits(config), stallMs: config.mqttDrainTimeoutSeconds * 1000, ...(cluster ? { backends: cluster.redis.backends, sync: () => projections.sync(config.projectionWaitMs) } : {}) });

    // Reactors: side effects driven by committed events, each from its own checkpoint (in a cluster: where it leads).
    const reactorDeps = { store, db, log, registry: ingest.registry, logs: ingest.logs, cluster: deps.cluster, outbound: deps.outbound };
    // What a channel's delivery checks: its creator's rights now, after the read models hold the batch's changes of rights.
    const channelDeps = { ...reactorDeps, principals, projections, clock: deps.clock };
    const calculations = new CalculationReactor({ store, db, log, projections, principals, clock: deps.clock, cluster: deps.cluster, windowReadings: config.calculationWindowReadings });
    const commandRetry: CommandRetry = { ...COMMAND_RETRY, ...options.commandRetry };
    const reactors = [
      new MqttOutput(channelDeps, (topic, payload) => broker.publish(topic, payload, 1), () => broker.holdConsumers()),
      new HttpChannels(store, db, ingest.registry, ingest.logs, log, new ChannelAccess(channelDeps), undefined, deps.cluster, deps.outbound),
      new GeofenceTracking(deps),
      // One connection per connector to an external broker across the cluster: held where command delivery leads,
      // so the node that sends a command holds the connection it leaves through.
      new CommandDelivery(
        { ...reactorDeps, projections },
        (connector, topic, message, key) => {
          if (typeof connector.doc.basicCredentialsSetId === 'string') return broker.publish(topic, message, 1);
          return externalBrokers.publish(connector.id, topic, message, key, commandRetry.callTimeoutMs);
        },
        commandRetry,
        externalBrokers,
      ),
      new RulesReactor(deps, { send: deviceCommands(deps, ingest.registry, openapi, translation), publish: (topic, payload) => broker.publish(topic, payload, 1) }, ingest.logs, options.scheduleMaxWaitMs),
      calculations,
    ];
    for (const reactor of reactors) {
      started.push(() => reactor.stop());
      await reactor.start();
      if ('subscriber' in reactor && reactor.subscriber) followers.push(reactor.subscriber);
    }
    // At a stop, after the front door: while Redis is away, a reactor's publish and the broker's close would wait for it.
    if (cluster) started.push(() => cluster.redis.letGo());
    // First at a stop, the front door, while everything behind it still runs: health answers 503 `stopping`, HTTP
    // takes no new connection and the requests under way finish (up to the grace); then the broker takes no new
    // connection or PUBLISH, and what the ingest pipeline was given is stored and acknowledged on the open connections.
    const graceMs = options.stopGraceMs ?? STOP_GRACE_MS;
    started.push(async () => {
      log.info('stopping: HTTP answers the requests under way and takes no new ones; health answers 503');
      const cut = await front.drain(Date.now() + graceMs);
      if (cut) log.warn({ requests: cut, graceMs }, 'stopping: HTTP requests still under way at the end of the grace are cut');
      if (!(await ingest.drain(Date.now() + graceMs))) log.warn({ graceMs }, 'stopping: the ingest pipeline did not store everything within the grace; those publishers send again');
    });
    metrics?.follow({
      sandbox: () => sandbox.stats(),
      calculations: () => calculations.windowStats(),
      subscribers: () => [projections.subscriber, ...reactors.flatMap((r): Lagging[] => ('subscriber' in r && r.subscriber ? [r.subscriber as Lagging] : []))],
    });
    const httpPort = (server.address() as AddressInfo).port;
    log.info({ port: httpPort }, 'HTTP listening');

    const logsWritten = async () => {
      await Promise.all([ingest.logs.idle(), translation.logsWritten()]);
    };
    return { deps, served, httpPort, mqttPort: broker.port, mqttTlsPort: broker.tlsPort, translation, logsWritten, stop: stopAll };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
