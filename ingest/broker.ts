import { createHash } from 'node:crypto';
import { createServer, type Server as NetServer, type AddressInfo } from 'node:net';
import type { Server as HttpServer } from 'node:http';
import { Aedes, type AuthenticateError, type Client, type PublishPacket } from 'aedes';
import { WebSocketServer, createWebSocketStream } from 'ws';
import type { Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../projections/database.js';
import { isUuid } from '../domain/shared/ids.js';
import { verifyPassword } from '../domain/users/password.js';
import { verifyToken } from '../api/auth/tokens.js';
import type { Registry } from './registry.js';
import type { IngestPipeline } from './pipeline.js';
import type { LogWriter } from './logWriter.js';

/** Payloads above this size are refused (acknowledged, not stored, logged): 256 KiB. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;
/** New connections per remote address: a bucket of this many, refilled at `CONNECT_RATE` per second. */
const CONNECT_BURST = 200;
const CONNECT_RATE = 100;
const MAX_CONNECTIONS = 20_000;

/** Who a connection logged in as. */
export type Session = { kind: 'user'; id: string } | { kind: 'credentials'; id: string };

export interface BrokerOptions {
  port: number;
  host?: string;
  httpServer?: HttpServer;
  registry: Registry;
  pipeline: IngestPipeline;
  logs: LogWriter;
  log: Logger;
  db: Kysely<Database>;
  jwtSecret: string;
}

export interface Broker {
  aedes: Aedes;
  port: number;
  /** Publishes from the platform itself (output topics, downlinks). */
  publish(topic: string, payload: Buffer | string, qos?: 0 | 1): Promise<void>;
  /** Corks the connections subscribed to output topics; the returned function uncorks them. */
  holdConsumers(): () => void;
  close(): Promise<void>;
}

const authError = (message: string, returnCode: number): AuthenticateError => Object.assign(new Error(message), { returnCode }) as AuthenticateError;
const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();

/**
 * The embedded MQTT broker (aedes 1.x) with the platform's rules:
 * - logins are a credentials set's username and password, or a user id with a
 *   valid access token as password; nothing else;
 * - a credentials set publishes only on topics reserved to it and below them;
 *   anything else is refused and closes the connection (MQTT 3.1.1 has no
 *   negative PUBACK); `$SYS/` stays refused;
 * - a consumer subscribes only below `svc/output/v2/<its id>/`, a credentials
 *   set also below `svc/push/v1/<its id>/`; other subscriptions get SUBACK 0x80;
 * - an accepted publish goes to the ingest pipeline, and its PUBACK waits
 *   until the pipeline has stored it.
 * aedes hooks are callback style: they are plain functions calling back.
 */
export async function startBroker(options: BrokerOptions): Promise<Broker> {
  const { registry, pipeline, logs, log, db, jwtSecret } = options;
  const sessions = new WeakMap<Client, Session>();
  const buckets = new Map<string, { tokens: number; at: number }>();
  let refusedConnects = 0;
  let lastRefusalLog = 0;
  /** `<password hash>\0<sha256(password)>` of logins that verified, so reconnects skip scrypt. */
  const verified = new Set<string>();

  const remoteOf = (client: Client): string => {
    const conn = client.conn as { remoteAddress?: string };
    return conn.remoteAddress ?? client.req?.socket.remoteAddress ?? 'unknown';
  };

  const refuseSet = (setId: string, message: string, kind: string) =>
    logs.write({ resourceId: setId, resourceType: 'credentialsSet', type: 'warning', priority: 'high', category: 'access', message }, kind);

  const aedes = await Aedes.createBroker({
    connectTimeout: 10_000,
    maxClientsIdLength: 256,
    preConnect(client, _packet, callback) {
      const ip = remoteOf(client);
      const now = Date.now();
      const b = buckets.get(ip) ?? { tokens: CONNECT_BURST, at: now };
      b.tokens = Math.min(CONNECT_BURST, b.tokens + ((now - b.at) / 1000) * CONNECT_RATE);
      b.at = now;
      buckets.set(ip, b);
      if (b.tokens < 1 || aedes.connectedClients >= MAX_CONNECTIONS) {
        refusedConnects++;
        if (now - lastRefusalLog > 1000) {
          log.warn({ remote: ip, refused: refusedConnects }, 'MQTT connections refused: too many new connections');
          lastRefusalLog = now;
          refusedConnects = 0;
        }
        return callback(new Error('too many connections'), false);
      }
      b.tokens -= 1;
      if (buckets.size > 10_000) for (const [k, v] of buckets) if (now - v.at > 60_000) buckets.delete(k);
      callback(null, true);
    },

    authenticate(client, username, password, callback) {
      if (!username || !password) {
        log.warn({ clientId: client.id, remote: remoteOf(client) }, 'MQTT login refused: no username or password');
        return callback(authError('Bad username or password', 4), false);
      }
      const secret = password.toString('utf8');
      if (isUuid(username)) {
        // A user: the password is an access token for that very user.
        if (verifyToken(jwtSecret, secret) !== username) {
          log.warn({ userId: username, remote: remoteOf(client) }, 'MQTT login refused: invalid or expired access token');
          return callback(authError('Not authorized', 5), false);
        }
        db.selectFrom('users')
          .select(['id', 'profile'])
          .where('id', '=', username)
          .executeTakeFirst()
          .then((user) => {
            if (!user || !user.profile.enabled) {
              log.warn({ userId: username }, 'MQTT login refused: user missing or disabled');
              return callback(authError('Not authorized', 5), false);
            }
            sessions.set(client, { kind: 'user', id: username });
            callback(null, true);
          }, (err) => {
            log.error({ err }, 'MQTT login failed');
            callback(authError('Server unavailable', 3), false);
          });
        return;
      }
      const set = registry.credentialsSetByUsername(username);
      if (!set) {
        log.warn({ username, remote: remoteOf(client) }, 'MQTT login refused: unknown username');
        return callback(authError('Bad username or password', 4), false);
      }
      const key = `${set.passwordHash}\u0000${sha256(secret).toString('hex')}`;
      const accept = () => {
        sessions.set(client, { kind: 'credentials', id: set.id });
        callback(null, true);
      };
      if (verified.has(key)) return accept();
      verifyPassword(secret, set.passwordHash).then((ok) => {
        if (!ok) {
          refuseSet(set.id, `MQTT login refused for ${username}: wrong password (from ${remoteOf(client)})`, 'wrong password');
          return callback(authError('Bad username or password', 4), false);
        }
        if (verified.size > 10_000) verified.clear();
        verified.add(key);
        accept();
      }, (err) => {
        log.error({ err }, 'MQTT password check failed');
        callback(authError('Server unavailable', 3), false);
      });
    },

    authorizeSubscribe(client, sub, callback) {
      const session = sessions.get(client);
      const topic = sub.topic;
      const allowed = (prefix: string) => topic.startsWith(prefix) && topic.length > prefix.length;
      if (session && (allowed(`svc/output/v2/${session.id}/`) || (session.kind === 'credentials' && allowed(`svc/push/v1/${session.id}/`)))) {
        return callback(null, sub);
      }
      if (session?.kind === 'credentials') refuseSet(session.id, `MQTT subscription to ${topic} refused: not a topic of this credentials set`, 'subscribe refused');
      else log.warn({ clientId: client.id, session, topic }, 'MQTT subscription refused');
      callback(null, null);
    },

    authorizePublish(client, packet, callback) {
      const topic = packet.topic;
      if (topic.startsWith('$SYS/')) return callback(new Error('$SYS/ topic is reserved'));
      const session = client ? sessions.get(client) : undefined;
      if (!client || !session) return callback(new Error('publish without a login'));
      if (session.kind !== 'credentials') {
        log.warn({ userId: session.id, topic }, 'MQTT publish refused: users only consume');
        return callback(new Error('users may not publish'));
      }
      if (topic.startsWith('/') || topic.endsWith('/') || topic.includes('//')) {
        refuseSet(session.id, `MQTT publish on ${topic} refused: empty topic level`, 'empty level');
        return callback(new Error('empty topic level'));
      }
      const resolved = registry.resolve(topic);
      if (!resolved || resolved.reserved.setId !== session.id) {
        refuseSet(session.id, `MQTT publish on ${topic} refused: the topic is not reserved to this credentials set`, 'publish refused');
        return callback(new Error('topic not reserved to this credentials set'));
      }
      // Device messages are data, never retained for later subscribers.
      packet.retain = false;
      const payload = packet.payload as Buffer;
      const fail = (why: string) => {
        refuseSet(session.id, `MQTT message on ${topic} not stored: ${why}`, why);
        callback(null);
      };
      if (payload.length > MAX_PAYLOAD_BYTES) return fail(`the payload is larger than ${MAX_PAYLOAD_BYTES} bytes`);
      let body: unknown;
      const text = payload.toString('utf8');
      // PostgreSQL cannot store NUL in text or JSON.
      if (text.includes('\u0000') || /\\u0000/.test(text) || topic.includes('\u0000')) return fail('the payload or topic contains a NUL character');
      try {
        body = JSON.parse(text);
      } catch {
        return fail('the payload is not JSON');
      }
      if (typeof body !== 'object' || body === null || Array.isArray(body)) return fail('the payload is not a JSON object');
      const hash = createHash('sha1').update(topic).update('\u0000').update(payload).digest('hex').slice(0, 16);
      const messageId = packet.qos > 0 ? (packet as PublishPacket).messageId : undefined;
      pipeline.submit({
        reserved: resolved.reserved,
        path: resolved.path,
        topic,
        payload: body as Record<string, unknown>,
        receivedAt: new Date().toISOString(),
        correlationId: `mqtt:${hash}:${messageId ?? '-'}:${client.id}`,
        dedup: messageId !== undefined ? { key: `${client.id}\u0000${messageId}`, hash, redelivery: packet.dup === true } : undefined,
        done: (err) => callback(err ?? null),
        conn: client.conn as unknown as { cork(): void; uncork(): void },
      });
    },
  });

  aedes.on('clientError', (client, err) => log.debug({ clientId: client.id, err: err.message }, 'MQTT client error'));
  aedes.on('connectionError', (client, err) => log.debug({ clientId: client?.id, err: err.message }, 'MQTT connection error'));

  const server: NetServer = createServer((socket) => aedes.handle(socket));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port }, 'MQTT listening');

  let wss: WebSocketServer | null = null;
  if (options.httpServer) {
    wss = new WebSocketServer({ server: options.httpServer, path: '/mqtt' });
    wss.on('connection', (ws, req) => {
      const stream = createWebSocketStream(ws);
      stream.on('error', () => stream.destroy());
      aedes.handle(stream, req);
    });
  }

  return {
    aedes,
    port,
    publish: (topic, payload, qos = 1) =>
      new Promise<void>((resolve, reject) =>
        aedes.publish({ cmd: 'publish', topic, payload: typeof payload === 'string' ? Buffer.from(payload) : payload, qos, retain: false, dup: false }, (err) => (err ? reject(err) : resolve())),
      ),
    holdConsumers() {
      const clients = Object.values((aedes as unknown as { clients: Record<string, Client & { subscriptions: Record<string, unknown> }> }).clients);
      const conns = clients.filter((c) => Object.keys(c.subscriptions).some((t) => t.startsWith('svc/output/v2/'))).map((c) => c.conn as unknown as { cork(): void; uncork(): void });
      for (const c of conns) c.cork();
      return () => {
        for (const c of conns) c.uncork();
      };
    },
    async close() {
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      if (wss) {
        for (const c of wss.clients) c.terminate();
        await new Promise<void>((resolve) => wss!.close(() => resolve()));
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

