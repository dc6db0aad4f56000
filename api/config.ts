import { readFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { hostname } from 'node:os';
import { DEFAULT_SESSION_LIMITS } from '../ingest/sessions.js';
import { DEFAULT_STALL_MS } from '../ingest/broker.js';
import { OUTBOUND_TARGETS, type OutboundTargets } from '../reactors/outbound.js';

/**
 * Configuration, all from the environment, checked at start. A bad value stops
 * the platform with one line naming the variable and what it accepts.
 */
export interface Config {
  port: number;
  mqttPort: number;
  databaseUrl: string | null;
  dataDir: string;
  eventstoreUrl: string | null;
  jwtSecret: string | null;
  adminUsername: string | null;
  adminPassword: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** How long a REST write waits for its events to reach the read models before answering 503. */
  projectionWaitMs: number;
  /** How long one database statement of an HTTP request may run before it is stopped and the request answers 503. */
  httpStatementTimeoutMs: number;
  /** How many database connections the HTTP front has, apart from those of ingest, the read models and the reactors. */
  httpConnections: number;
  /** How many of one user's requests run at a time (`api/turns.ts`); more wait their turn. */
  httpUserConcurrency: number;
  /** How many of one user's requests wait their turn at most; one more answers 429. */
  httpUserQueue: number;
  /** Lifetime of an access token, in seconds. */
  tokenTtlSeconds: number;
  /** The bearer token `GET /metrics` asks for; null: metrics are off (not collected, and the route answers 404). */
  metricsToken: string | null;
  /** MQTT over TLS: its port and the PEM files of its certificate (chain) and key; null: no TLS port. */
  mqttTls: { port: number; certFile: string; keyFile: string } | null;
  /** Set: this process is one node of a cluster sharing the database and this Redis (`docs/operations.md`). */
  redisUrl: string | null;
  /** This node's name in logs, health and `es.leases`. */
  nodeName: string;
  /** The most readings the calculations reactor keeps in memory for `onChange` windows; 0: the database aggregates every window. */
  calculationWindowReadings: number;
  /** The most QoS 1 messages kept for a persistent MQTT session; one more drops the oldest. */
  mqttSessionQueueLimit: number;
  /** How long a persistent MQTT session's client may be away before the session ends, in seconds; 0: never. */
  mqttSessionExpirySeconds: number;
  /** How long an MQTT connection's unsent output may wait for its client to read before the connection is closed, in seconds. */
  mqttDrainTimeoutSeconds: number;
  /** Which addresses channels, rules and network-server calls may reach (`reactors/outbound.ts`). */
  outboundTargets: OutboundTargets;
}

/** The persistent MQTT sessions' bounds, as the broker (and in a cluster its Redis store) takes them. */
export const sessionLimits = (config: Pick<Config, 'mqttSessionQueueLimit' | 'mqttSessionExpirySeconds'>) => ({
  queue: config.mqttSessionQueueLimit,
  expiryMs: config.mqttSessionExpirySeconds * 1000,
});

export class ConfigError extends Error {}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const text = (name: string): string | null => {
    const v = env[name];
    return v === undefined || v === '' ? null : v;
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = text(name);
    if (raw === null) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max) throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got '${raw}'`);
    return n;
  };
  const url = (name: string, schemes: string[]): string | null => {
    const raw = text(name);
    if (raw === null) return null;
    let parsed: URL;
    try {
      parsed = new URL(raw);
    } catch {
      throw new ConfigError(`${name} must be a URL (${schemes.join('://, ')}://), got '${withoutPassword(raw)}'`);
    }
    if (!schemes.includes(parsed.protocol.replace(/:$/, ''))) throw new ConfigError(`${name} must start with ${schemes.join('://, ')}://`);
    return raw;
  };

  const adminUsername = text('ADMIN_USERNAME');
  const adminPassword = text('ADMIN_PASSWORD');
  if ((adminUsername === null) !== (adminPassword === null)) throw new ConfigError('ADMIN_USERNAME and ADMIN_PASSWORD must be set together');
  if (adminPassword !== null && adminPassword.length < 8) throw new ConfigError('ADMIN_PASSWORD must have at least 8 characters');

  const jwtSecret = text('JWT_SECRET');
  if (jwtSecret !== null && jwtSecret.length < 32) throw new ConfigError('JWT_SECRET must have at least 32 characters');

  const redisUrl = url('REDIS_URL', ['redis', 'rediss']);
  // The nodes of a cluster share one database and sign tokens that every node accepts.
  if (redisUrl !== null && text('DATABASE_URL') === null) throw new ConfigError('REDIS_URL needs DATABASE_URL: the nodes of a cluster share one PostgreSQL (the private one under DATA_DIR serves one process)');
  if (redisUrl !== null && jwtSecret === null) throw new ConfigError('REDIS_URL needs JWT_SECRET: every node of a cluster must accept the tokens the others sign');
  const nodeName = text('NODE_NAME') ?? `${hostname()}-${process.pid}`;
  if (!/^[\w.:-]{1,100}$/.test(nodeName)) throw new ConfigError(`NODE_NAME must be 1 to 100 letters, digits, '.', ':', '_' or '-', got '${nodeName}'`);

  const logLevel = (text('LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) throw new ConfigError(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}`);

  const outboundTargets = (text('OUTBOUND_TARGETS') ?? 'public') as OutboundTargets;
  if (!OUTBOUND_TARGETS.includes(outboundTargets)) throw new ConfigError(`OUTBOUND_TARGETS must be one of ${OUTBOUND_TARGETS.join(', ')}`);

  const metricsToken = text('METRICS_TOKEN');
  if (metricsToken !== null && metricsToken.length < 16) throw new ConfigError('METRICS_TOKEN must have at least 16 characters');

  return {
    port: int('PORT', 3000, 0, 65535),
    mqttPort: int('MQTT_PORT', 1883, 0, 65535),
    databaseUrl: url('DATABASE_URL', ['postgres', 'postgresql']),
    dataDir: text('DATA_DIR') ?? './data',
    eventstoreUrl: url('EVENTSTORE_URL', ['esdb', 'esdb+discover']),
    jwtSecret,
    adminUsername,
    adminPassword,
    logLevel,
    projectionWaitMs: int('PROJECTION_WAIT_MS', 5000, 1, 600000),
    httpStatementTimeoutMs: int('HTTP_STATEMENT_TIMEOUT_MS', 30_000, 100, 3_600_000),
    httpConnections: int('HTTP_DATABASE_CONNECTIONS', 10, 2, 100),
    httpUserConcurrency: int('HTTP_USER_CONCURRENCY', 4, 1, 1000),
    httpUserQueue: int('HTTP_USER_QUEUE', 100, 0, 100_000),
    tokenTtlSeconds: int('TOKEN_TTL_SECONDS', 3600, 60, 30 * 24 * 3600),
    metricsToken,
    mqttTls: mqttTls(text, int),
    redisUrl,
    nodeName,
    calculationWindowReadings: int('CALCULATION_WINDOW_READINGS', 2_000_000, 0, 100_000_000),
    mqttSessionQueueLimit: int('MQTT_SESSION_QUEUE_LIMIT', DEFAULT_SESSION_LIMITS.queue, 1, 10_000_000),
    mqttSessionExpirySeconds: int('MQTT_SESSION_EXPIRY_SECONDS', DEFAULT_SESSION_LIMITS.expiryMs / 1000, 0, 10 * 365 * 86_400),
    mqttDrainTimeoutSeconds: int('MQTT_DRAIN_TIMEOUT_SECONDS', DEFAULT_STALL_MS / 1000, 1, 3600),
    outboundTargets,
  };
}

/**
 * A URL as a message may show it: its userinfo (what stands between `://` and the last `@`, where a password
 * is, even one with characters that keep the URL from parsing) masked, the user name before a `:` kept when it
 * can be told apart. Configuration errors go to logs and terminals, which must never show a database's or Redis's password.
 */
export function withoutPassword(raw: string): string {
  const m = /^([A-Za-z][A-Za-z0-9+.-]*:\/\/)(.*)@/s.exec(raw);
  if (!m) return raw;
  const userinfo = m[2]!;
  const colon = userinfo.indexOf(':');
  const user = colon >= 0 ? userinfo.slice(0, colon) : userinfo;
  // Userinfo without a colon may be a password alone (some clients read `redis://secret@host` so): masked whole.
  const shown = colon >= 0 && !/[/?#@]/.test(user) ? `${user}:***` : '***';
  return `${m[1]}${shown}@${raw.slice(m[0].length)}`;
}

/**
 * MQTT over TLS is on when both PEM files are given, on `MQTT_TLS_PORT`
 * (default 8883). The files are read here, and must hold a certificate and
 * the private key that goes with it, so a mistake stops the start rather
 * than the first device's handshake.
 */
function mqttTls(text: (name: string) => string | null, int: (name: string, fallback: number, min: number, max: number) => number): Config['mqttTls'] {
  const certFile = text('TLS_CERT_FILE');
  const keyFile = text('TLS_KEY_FILE');
  if (certFile === null && keyFile === null) {
    if (text('MQTT_TLS_PORT') !== null) throw new ConfigError('MQTT_TLS_PORT needs TLS_CERT_FILE and TLS_KEY_FILE (PEM files of the certificate and its private key)');
    return null;
  }
  if (certFile === null || keyFile === null) throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
  const read = (name: string, file: string): string => {
    try {
      return readFileSync(file, 'utf8');
    } catch (error) {
      throw new ConfigError(`${name} cannot be read: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message} (${file})`);
    }
  };
  const cert = read('TLS_CERT_FILE', certFile);
  const key = read('TLS_KEY_FILE', keyFile);
  if (!cert.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError(`TLS_CERT_FILE must be a PEM certificate (${certFile})`);
  try {
    createSecureContext({ cert, key });
  } catch (error) {
    throw new ConfigError(`TLS_CERT_FILE and TLS_KEY_FILE must be a PEM certificate and its own private key: ${(error as Error).message}`);
  }
  return { port: int('MQTT_TLS_PORT', 8883, 0, 65535), certFile, keyFile };
}
