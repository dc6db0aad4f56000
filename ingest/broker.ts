import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server as NetServer, type AddressInfo, type Socket } from 'node:net';
import { createServer as createTlsServer, type Server as TlsServer } from 'node:tls';
import type { Counter, Gauge } from 'prom-client';
import type { Duplex, Readable } from 'node:stream';
import type { Server as HttpServer } from 'node:http';
import { Aedes, type AuthenticateError, type Client, type PublishPacket } from 'aedes';
import { WebSocketServer, createWebSocketStream } from 'ws';
import { sql, type Kysely } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../projections/database.js';
import { isUuid } from '../domain/shared/ids.js';
import { verifyPassword } from '../domain/users/password.js';
import { verifyToken, type TokenClaims } from '../domain/access/tokens.js';
import { comparePositions } from '../domain/shared/events.js';
import type { Profile } from '../domain/users/user.js';
import { READ_MODELS } from '../projections/runner.js';
import type { Registry, Resolved } from './registry.js';
import { dedupKey, type IngestPipeline } from './pipeline.js';
import { MAX_PAYLOAD_BYTES, messageHash, readPayload } from './payload.js';
import type { LogWriter } from '../domain/logs/writer.js';
import { BoundedMemoryPersistence, DEFAULT_SESSION_LIMITS, MemoryLastSeen, forAedes, keepOnlyAllowed, keepSessions, type BoundedPersistence, type LastSeen, type SessionLimits } from './sessions.js';

export { MAX_PAYLOAD_BYTES };
/**
 * The hard limit on an MQTT packet's remaining length (the payload plus topic and
 * header fields): a larger packet closes the connection as soon as its fixed
 * header arrives, before anything of it is buffered.
 */
export const MAX_PACKET_BYTES = MAX_PAYLOAD_BYTES + 64 * 1024;
/** A WebSocket message (which carries one or more MQTT packets, or part of one) is refused above this size. */
const MAX_WS_MESSAGE_BYTES = 1024 * 1024;
/** New connections per remote address: a bucket of this many, refilled at `CONNECT_RATE` per second. */
const CONNECT_BURST = 200;
const CONNECT_RATE = 100;
const MAX_CONNECTIONS = 20_000;
/**
 * A client id longer than this (UTF-8 bytes) is refused at CONNECT (return code 2, identifier rejected). MQTT 3.1.1
 * lets a broker choose its limit; the id is part of every report's correlation id, an indexed key of the event log.
 * aedes's own `maxClientsIdLength` applies to MQTT 3.1 only.
 */
export const MAX_CLIENT_ID_BYTES = 256;
/**
 * Messages the broker delivers at once (aedes's `concurrency`, 100 by
 * default). The output reactor hands the broker a whole batch while the
 * consumers' connections are corked (`holdConsumers`); deliveries past this
 * many wait for earlier ones to be written, which under the cork happens only
 * once it is released, and each of them then left in a write of its own.
 */
const DELIVERIES_IN_FLIGHT = 5_000;

/**
 * Topics one connection may be subscribed to at once. Each is kept in the
 * broker's memory and in the session's store, and a consumer of many devices
 * subscribes with a wildcard (`svc/output/v2/<id>/#`); past this many a
 * SUBSCRIBE gets SUBACK 0x80 for each new topic.
 */
export const MAX_SUBSCRIPTIONS = 1_000;

/**
 * Who a connection logged in as, the client id it chose, and the
 * connection's own id, unique across the nodes of a cluster (the redelivery
 * memory tells a re-send from a new message by the connection that sent it).
 */
export type Session = { kind: 'user' | 'credentials' | 'app'; id: string; clientId: string; connection: string };

/** The subscribe rule: an identity's own output topics, and a credentials set's own push topics. */
function maySubscribe(session: Session | undefined, topic: string): boolean {
  const below = (prefix: string) => topic.startsWith(prefix) && topic.length > prefix.length;
  return !!session && (below(`svc/output/v2/${session.id}/`) || (session.kind === 'credentials' && below(`svc/push/v1/${session.id}/`)));
}

/** A connection's id: 72 random bits, short because the cluster's redelivery memory stores one with every QoS 1 message. */
const connectionId = () => randomBytes(9).toString('base64url');

/**
 * Client ids are scoped to the identity that logs in: the broker keys
 * sessions, takeovers and redelivery memory by `<identity>/<client id>`, so
 * another identity choosing the same client id gets a session of its own and
 * never takes over, or reads, someone else's.
 */
export const scopedClientId = (identity: string, clientId: string) => `${identity}/${clientId}`;

/**
 * What the broker reports: open connections by transport, PUBLISH packets in
 * and out, failed TLS handshakes, messages full session queues dropped and
 * sessions ended by their expiry.
 */
export interface BrokerMetrics {
  connections: Gauge<'transport'>;
  received: Counter;
  sent: Counter;
  tlsRefused: Counter;
  sessionDrops: Counter;
  sessionsExpired: Counter;
}

/** The broker's message bus and session store: in a cluster from `ingest/cluster.ts`, otherwise in memory. */
export interface BrokerBackends {
  mq: unknown;
  /** The sessions' store, and their last-seen times. */
  sessions: { store: BoundedPersistence; seen: LastSeen };
}

/** How long a connection's unsent output may wait for the client to read before the connection is closed. */
export const DEFAULT_STALL_MS = 30_000;

/** A TLS handshake that fails within this time is refused; a client that says nothing is cut off. */
const TLS_HANDSHAKE_MS = 10_000;
/** Refused TLS handshakes logged per second at most; the rest are counted. */
const TLS_REFUSALS_LOGGED = 10;

export interface BrokerOptions {
  port: number;
  host?: string;
  /** MQTT over TLS: its port, and the PEM certificate (chain) and private key it presents. */
  tls?: { port: number; cert: string; key: string } | null;
  httpServer?: HttpServer;
  registry: Registry;
  pipeline: IngestPipeline;
  logs: LogWriter;
  log: Logger;
  db: Kysely<Database>;
  jwtSecret: string;
  metrics?: BrokerMetrics | null;
  /** The platform clock: a message's `receivedAt`, which becomes its report's `reportedAt`. */
  clock?: () => Date;
  /** In a cluster: the shared message bus and session persistence (`ingest/cluster.ts`); absent: in memory. */
  backends?: BrokerBackends;
  /** Bounds on persistent sessions (`ingest/sessions.ts`); in a cluster the persistence was made with the same. */
  sessions?: SessionLimits;
  /** A connection whose unsent output has not drained for this long is closed (`guardUnsent`). */
  stallMs?: number;
  /**
   * In a cluster: waits until the registry holds what the read models show
   * (`ProjectionRunner.sync`); a login under a name, or a publish on a topic,
   * the registry does not know is tried once more after it, so credentials and
   * topics written on another node work at once.
   */
  sync?: () => Promise<void>;
}

export interface Broker {
  aedes: Aedes;
  port: number;
  /** The TLS port bound, or null when MQTT over TLS is off. */
  tlsPort: number | null;
  /** Publishes from the platform itself (output topics, downlinks). */
  publish(topic: string, payload: Buffer | string, qos?: 0 | 1): Promise<void>;
  /** Corks the connections subscribed to output topics; the returned function uncorks them. */
  holdConsumers(): () => void;
  /**
   * The first step of a stop: no new connection is accepted, and a PUBLISH that arrives from here on is
   * neither taken nor acknowledged (its client sends it again after it reconnects, to another node); the
   * connections stay open, so what the pipeline still stores is acknowledged on them.
   */
  stopTaking(): void;
  /** Resolves once what was written to the connections so far has left for the network, or at `deadline`. */
  written(deadline: number): Promise<void>;
  /**
   * Ends every connection: each is closed from this side after what was written to it (a client reads its last
   * acknowledgements, then the end), and cut at `deadline` if its client has not closed it by then.
   */
  close(deadline?: number): Promise<void>;
}

/** How long a stop waits for clients to close their connections once the broker has ended them. */
const END_WAIT_MS = 2000;

/** Errors the hooks already reported (refusals, failed batches); aedes reports them again as the error that closed the connection. */
const reported = new WeakSet<Error>();
const refusal = (message: string): Error => {
  const err = new Error(message);
  reported.add(err);
  return err;
};
const authError = (message: string, returnCode: number): AuthenticateError => Object.assign(refusal(message), { returnCode }) as AuthenticateError;
/** How a connection ended without the client breaking a rule: nothing to tell its owner. */
const ORDINARY_END = /^(keep alive timeout|connection closed|drain timeout|connect did not arrive in time)$/;

/** The error that closes a connection whose packet is over `MAX_PACKET_BYTES`. */
export class PacketTooLargeError extends Error {
  constructor(readonly declared: number) {
    super(`an MQTT packet of ${declared} bytes is larger than the limit of ${MAX_PACKET_BYTES} bytes`);
  }
}

/**
 * Follows the MQTT framing of everything a connection receives (fixed header
 * byte, remaining length as a variable byte integer, then that many bytes) and
 * destroys the stream with `PacketTooLargeError` when a packet declares a
 * remaining length above `limit`. It hooks `push`, where the socket (or the
 * WebSocket stream) hands over received chunks, so the oversized packet is
 * refused from its first bytes whatever way the broker reads the stream; the
 * cost is a few comparisons per packet.
 */
export function guardPacketSize(stream: Readable, limit: number = MAX_PACKET_BYTES): void {
  let skip = 0; // bytes of the current packet still to pass
  let inLength = false; // reading the remaining length
  let length = 0;
  let multiplier = 1;
  let lengthBytes = 0;
  const push = stream.push;
  stream.push = function guardedPush(chunk: unknown, encoding?: BufferEncoding): boolean {
    if (Buffer.isBuffer(chunk)) {
      for (let i = 0; i < chunk.length; ) {
        if (skip > 0) {
          const n = Math.min(skip, chunk.length - i);
          skip -= n;
          i += n;
          continue;
        }
        const byte = chunk[i++]!;
        if (!inLength) {
          inLength = true;
          length = 0;
          multiplier = 1;
          lengthBytes = 0;
          continue;
        }
        length += (byte & 0x7f) * multiplier;
        multiplier *= 128;
        lengthBytes++;
        // A fifth length byte is malformed; counting it as oversized ends the connection as well.
        if (byte & 0x80 && lengthBytes < 5) continue;
        inLength = false;
        if (length > limit || byte & 0x80) {
          stream.push = push;
          stream.destroy(new PacketTooLargeError(length));
          return false;
        }
        skip = length;
      }
    }
    return push.call(this, chunk as Buffer, encoding);
  };
}
/** A connection's unsent output beyond this many bytes closes it at the next check. */
export const MAX_UNSENT_BYTES = 64 * 1024 * 1024;
/** How often a connection whose buffer is full is checked, until it drains. */
const UNSENT_CHECK_MS = 1000;

/** The error that closes a connection that does not take what the broker sends it. */
export class StalledReaderError extends Error {
  constructor(readonly unsent: number, readonly stalledMs: number) {
    super(stalledMs > 0 ? `${unsent} bytes waited ${Math.round(stalledMs / 1000)} s for the client to read them` : `${unsent} bytes waited for the client, more than the limit of ${MAX_UNSENT_BYTES}`);
  }
}

/**
 * Keeps a connection that stops reading from holding up everyone else. aedes
 * hands a message to the next one only once every subscriber's connection
 * took it, and waits for a full connection to drain: one consumer that stops
 * reading (a frozen process, a dead link not yet noticed) would stall every
 * output topic until aedes's drain time-out. So this connection never asks
 * the broker to wait: what it cannot send yet is kept in its own buffer, and
 * the connection is closed when that buffer has not emptied within `stallMs`
 * of the first write that found it full, or holds more than
 * `MAX_UNSENT_BYTES` at a check (every second while it is full; never inside
 * a write, where a corked batch may briefly hold more).
 */
export function guardUnsent(stream: NodeJS.WritableStream & { writableLength: number; destroy(error?: Error): void; destroyed: boolean }, stallMs: number): void {
  let fullSince = 0;
  let timer: NodeJS.Timeout | null = null;
  const stop = () => {
    if (timer) clearInterval(timer);
    timer = null;
  };
  const check = () => {
    const stalled = Date.now() - fullSince;
    const over = stream.writableLength > MAX_UNSENT_BYTES;
    if (!over && stalled < stallMs) return;
    stop();
    if (!stream.destroyed) stream.destroy(new StalledReaderError(stream.writableLength, over ? 0 : stalled));
  };
  stream.on('drain', stop);
  stream.on('close', stop);
  const write = stream.write;
  stream.write = function unblockedWrite(this: typeof stream, ...args: unknown[]): boolean {
    const room = (write as (...a: unknown[]) => boolean).apply(this, args);
    if (!room && !timer && !stream.destroyed) {
      // Full: checked every second (never inside a write, which mqtt-packet and the output reactor cork) until it drains.
      fullSince = Date.now();
      timer = setInterval(check, Math.min(stallMs, UNSENT_CHECK_MS));
      timer.unref();
    }
    return true;
  } as typeof stream.write;
}

const sha256 = (b: Buffer | string) => createHash('sha256').update(b).digest();

/** The longest delay `setTimeout` takes (about 24.8 days); a token may live 30. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * The embedded MQTT broker (aedes 1.x) with the platform's rules:
 * - logins are a credentials set's username and password, a user id with a
 *   valid access token as password, or a client app's id and secret; nothing
 *   else;
 * - a user's connection lasts as long as its token would be accepted over
 *   REST: it is closed when the token expires, and when the user is deleted
 *   or disabled or their password is changed or reset (on every node of a
 *   cluster, each following the log for itself), as an app's is when it is
 *   deleted or given a new secret;
 * - a credentials set publishes only on topics reserved to it and below them;
 *   anything else is refused and closes the connection (MQTT 3.1.1 has no
 *   negative PUBACK); `$SYS/` stays refused;
 * - a consumer (user, app, credentials set) subscribes only below
 *   `svc/output/v2/<its id>/`, a credentials set also below
 *   `svc/push/v1/<its id>/`; other subscriptions get SUBACK 0x80; users and
 *   apps only consume;
 * - an accepted publish goes to the ingest pipeline, and its PUBACK waits
 *   until the pipeline has stored it.
 * aedes hooks are callback style: they are plain functions calling back.
 */
export async function startBroker(options: BrokerOptions): Promise<Broker> {
  const { registry, pipeline, logs, log, db, jwtSecret } = options;
  const metrics = options.metrics ?? null;
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
  const refuseApp = (appId: string, message: string, kind: string) =>
    logs.write({ resourceId: appId, resourceType: 'app', type: 'warning', priority: 'high', category: 'access', message }, kind);

  /** A login with a secret checked against a stored scrypt hash; a secret that verified once skips scrypt on reconnects. */
  const checkSecret = (hash: string, secret: string, ok: () => void, wrong: () => void, client: Client, callback: (error: AuthenticateError | null, success: boolean | null) => void) => {
    const key = `${hash}\u0000${sha256(secret).toString('hex')}`;
    if (verified.has(key)) return ok();
    verifyPassword(secret, hash).then((good) => {
      if (!good) return wrong();
      if (verified.size > 10_000) verified.clear();
      verified.add(key);
      ok();
    }, (err) => {
      log.error({ err, clientId: client.id }, 'MQTT password check failed');
      callback(authError('Server unavailable', 3), false);
    });
  };

  /** A login as a client app (its id) or a credentials set (its username), with the registry as it is now. */
  const login = (client: Client, username: string, secret: string, callback: (error: AuthenticateError | null, success: boolean | null) => void): void => {
    const app = registry.app(username);
    if (app) {
      // A client app: its id and its secret. It consumes its own output topics, as a user does.
      return checkSecret(app.secretHash, secret, () => {
        sessions.set(client, { kind: 'app', id: app.id, clientId: client.id, connection: connectionId() });
        client.id = scopedClientId(app.id, client.id);
        callback(null, true);
      }, () => {
        refuseApp(app.id, `MQTT login refused for app ${app.id}: wrong secret (from ${remoteOf(client)})`, 'wrong secret');
        callback(authError('Bad username or password', 4), false);
      }, client, callback);
    }
    const set = registry.credentialsSetByUsername(username);
    if (!set) {
      log.warn({ username, remote: remoteOf(client) }, 'MQTT login refused: unknown username');
      return callback(authError('Bad username or password', 4), false);
    }
    checkSecret(set.passwordHash, secret, () => {
      sessions.set(client, { kind: 'credentials', id: set.id, clientId: client.id, connection: connectionId() });
      client.id = scopedClientId(set.id, client.id);
      callback(null, true);
    }, () => {
      refuseSet(set.id, `MQTT login refused for ${username}: wrong password (from ${remoteOf(client)})`, 'wrong password');
      callback(authError('Bad username or password', 4), false);
    }, client, callback);
  };

  /** Each user's open connections, with the timer that closes each when its token expires. */
  const userClients = new Map<string, Map<Client, NodeJS.Timeout | null>>();

  /** Closes a connection; one whose CONNECT is still being answered is closed once it is (aedes would register it after a close). */
  const shut = (client: Client) => {
    if (client.closed) return;
    if (client.connected) client.close();
    else client.once('connected', () => client.close());
  };

  const endUserConnection = (client: Client, userId: string, why: string) => {
    userClients.get(userId)?.delete(client);
    log.info({ userId, clientId: sessions.get(client)?.clientId ?? client.id, why }, `MQTT connection of a user closed: ${why}`);
    shut(client);
  };

  /** Keeps a user's connection to be closed on revocation, and closes it when its token expires. */
  const trackUser = (client: Client, userId: string, expiresAt: number) => {
    let mine = userClients.get(userId);
    if (!mine) userClients.set(userId, (mine = new Map()));
    const clients = mine;
    const arm = () => {
      const left = expiresAt - Date.now();
      if (left <= 0) return endUserConnection(client, userId, 'its access token expired');
      const timer = setTimeout(arm, Math.min(left, MAX_TIMER_MS));
      timer.unref();
      clients.set(client, timer);
    };
    clients.set(client, null);
    arm();
    (client.conn as unknown as NodeJS.EventEmitter).once('close', () => {
      const timer = clients.get(client);
      if (timer) clearTimeout(timer);
      clients.delete(client);
      if (clients.size === 0 && userClients.get(userId) === clients) userClients.delete(userId);
    });
  };

  /**
   * A user's login: the user must exist, be enabled, and be at the token's
   * version (no password change or reset since it was issued). The user and
   * the read models' checkpoint are read in one statement; a revocation this
   * node has seen beyond that checkpoint (it came while the login was being
   * checked, or the read models have not applied it yet) refuses the login,
   * and one that comes after the login closes the connection.
   */
  const userLogin = (client: Client, userId: string, claims: TokenClaims, callback: (error: AuthenticateError | null, success: boolean | null) => void) => {
    const refuse = (why: string) => {
      log.warn({ userId, remote: remoteOf(client) }, `MQTT login refused: ${why}`);
      callback(authError('Not authorized', 5), false);
    };
    // In a cluster this node's registry first catches up with the read models, so every revocation they show is known here.
    (options.sync ? options.sync() : Promise.resolve())
      .then(() =>
        sql<{ profile: Profile | null; token_version: number | null; c: string | null; p: string | null }>`
          SELECT u.profile, u.token_version, c.commit_position AS c, c.prepare_position AS p
          FROM (SELECT 1) AS one
          LEFT JOIN users u ON u.id = ${userId}::uuid
          LEFT JOIN es.checkpoints c ON c.name = ${READ_MODELS}`.execute(db),
      )
      .then(({ rows }) => {
        const row = rows[0];
        if (!row?.profile || !row.profile.enabled) return refuse('user missing or disabled');
        if (row.token_version !== claims.version) return refuse('access token issued before the user\'s latest password change or reset');
        const revoked = registry.userRevokedAt(userId);
        const checkpoint = row.c !== null && row.p !== null ? { commit: BigInt(row.c), prepare: BigInt(row.p) } : null;
        if (revoked && (!checkpoint || comparePositions(revoked, checkpoint) > 0)) return refuse('the user\'s logins were revoked while the login was checked');
        sessions.set(client, { kind: 'user', id: userId, clientId: client.id, connection: connectionId() });
        if (!client.closed) trackUser(client, userId, claims.expiresAt);
        client.id = scopedClientId(userId, client.id);
        callback(null, true);
      }, (err) => {
        log.error({ err }, 'MQTT login failed');
        callback(authError('Server unavailable', 3), false);
      });
  };

  const refuseTopic = (session: Session, topic: string, callback: (error?: Error | null) => void) => {
    refuseSet(session.id, `MQTT publish on ${topic} refused: the topic is not reserved to this credentials set`, 'publish refused');
    callback(refusal('topic not reserved to this credentials set'));
  };

  /** A device's publish on its reserved topic: checked at the edge, then into the ingest pipeline, acknowledged once stored. */
  const take = (client: Client, session: Session, packet: PublishPacket, resolved: Resolved, callback: (error?: Error | null) => void) => {
    const topic = packet.topic;
    // Device messages are data, never retained for later subscribers.
    packet.retain = false;
    const payload = packet.payload as Buffer;
    const read = readPayload(topic, payload);
    if ('why' in read) {
      refuseSet(session.id, `MQTT message on ${topic} not stored: ${read.why}`, read.why);
      return callback(null);
    }
    const hash = messageHash(topic, payload);
    const messageId = packet.qos > 0 ? packet.messageId : undefined;
    pipeline.submit({
      kind: 'topic',
      reserved: resolved.reserved,
      path: resolved.path,
      topic,
      payload: read.body,
      receivedAt: (options.clock?.() ?? new Date()).toISOString(),
      correlationId: `mqtt:${hash}:${messageId ?? '-'}:${session.clientId}`,
      dedup: messageId !== undefined ? { key: dedupKey(session.id, session.clientId, messageId), hash, redelivery: packet.dup === true } : undefined,
      done: (err) => {
        // A failed batch is the platform's trouble, reported by the pipeline; the publisher just sends again.
        if (err) reported.add(err);
        callback(err ?? null);
      },
      conn: client.conn as unknown as { cork(): void; uncork(): void },
      connection: session.connection,
    });
  };

  /** False from the start of a stop: publishes are held (`held`) instead of taken. */
  let taking = true;
  const held = new Set<(error?: Error | null) => void>();

  const limits = options.sessions ?? DEFAULT_SESSION_LIMITS;
  const store = options.backends?.sessions.store ?? new BoundedMemoryPersistence(limits.queue);
  keepOnlyAllowed(store, (client, topic) => maySubscribe(sessions.get(client as Client), topic));
  const aedes = await Aedes.createBroker({
    ...(options.backends ? { mq: options.backends.mq } : {}),
    persistence: forAedes(store) as NonNullable<Parameters<typeof Aedes.createBroker>[0]>['persistence'],
    connectTimeout: 10_000,
    maxClientsIdLength: MAX_CLIENT_ID_BYTES,
    concurrency: DELIVERIES_IN_FLIGHT,
    preConnect(client, _packet, callback) {
      if (!taking) return callback(refusal('the broker is stopping'), false);
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
        return callback(refusal('too many connections'), false);
      }
      b.tokens -= 1;
      if (buckets.size > 10_000) for (const [k, v] of buckets) if (now - v.at > 60_000) buckets.delete(k);
      callback(null, true);
    },

    authenticate(client, username, password, callback) {
      if (Buffer.byteLength(client.id) > MAX_CLIENT_ID_BYTES) {
        log.warn({ clientId: client.id.slice(0, 64), remote: remoteOf(client) }, `MQTT login refused: client id longer than ${MAX_CLIENT_ID_BYTES} bytes`);
        return callback(authError('Identifier rejected', 2), false);
      }
      if (!username || !password) {
        log.warn({ clientId: client.id, remote: remoteOf(client) }, 'MQTT login refused: no username or password');
        return callback(authError('Bad username or password', 4), false);
      }
      const secret = password.toString('utf8');
      if (isUuid(username)) {
        // A user: the password is an access token for that very user.
        const claims = verifyToken(jwtSecret, secret);
        if (!claims || claims.userId !== username) {
          log.warn({ userId: username, remote: remoteOf(client) }, 'MQTT login refused: invalid or expired access token');
          return callback(authError('Not authorized', 5), false);
        }
        return userLogin(client, username, claims, callback);
      }
      if (options.sync && !registry.app(username) && !registry.credentialsSetByUsername(username)) {
        options.sync().then(
          () => login(client, username, secret, callback),
          (err) => {
            log.warn({ err, username }, 'MQTT login waits for this node\'s indexes, which did not catch up in time');
            callback(authError('Server unavailable', 3), false);
          },
        );
        return;
      }
      login(client, username, secret, callback);
    },

    authorizeSubscribe(client, sub, callback) {
      const session = sessions.get(client);
      const topic = sub.topic;
      const held = (client as Client & { subscriptions: Record<string, unknown> }).subscriptions;
      if (maySubscribe(session, topic)) {
        if (topic in held || Object.keys(held).length < MAX_SUBSCRIPTIONS) return callback(null, sub);
        const message = `MQTT subscription to ${topic} refused: a connection holds at most ${MAX_SUBSCRIPTIONS} subscriptions; subscribe with a wildcard (svc/output/v2/<id>/#)`;
        if (session?.kind === 'credentials') refuseSet(session.id, message, 'too many subscriptions');
        else if (session?.kind === 'app') refuseApp(session.id, message, 'too many subscriptions');
        else log.warn({ clientId: client.id, session, topic }, 'MQTT subscription refused: too many subscriptions on one connection');
        return callback(null, null);
      }
      if (session?.kind === 'credentials') refuseSet(session.id, `MQTT subscription to ${topic} refused: not a topic of this credentials set`, 'subscribe refused');
      else if (session?.kind === 'app') refuseApp(session.id, `MQTT subscription to ${topic} refused: an app subscribes only below svc/output/v2/${session.id}/`, 'subscribe refused');
      else log.warn({ clientId: client.id, session, topic }, 'MQTT subscription refused');
      callback(null, null);
    },

    authorizePublish(client, packet, callback) {
      metrics?.received.inc();
      // Stopping: not taken, not acknowledged; answered with an error when the connection is ended (`close`).
      if (!taking) {
        held.add(callback);
        return;
      }
      const topic = packet.topic;
      const session = client ? sessions.get(client) : undefined;
      if (!client || !session) return callback(new Error('publish without a login'));
      if (session.kind === 'app') {
        refuseApp(session.id, `MQTT publish on ${topic} refused: apps only consume`, 'publish refused');
        return callback(refusal('apps may not publish'));
      }
      if (session.kind !== 'credentials') {
        log.warn({ userId: session.id, topic }, 'MQTT publish refused: users only consume');
        return callback(refusal('users may not publish'));
      }
      if (packet.qos === 2) {
        // QoS 2 keeps each publish in the session until the client's PUBREL, which a client may never send: a store a
        // client could fill without bound. QoS 1 with the platform's re-send detection already stores a message once.
        refuseSet(session.id, `MQTT publish on ${topic} refused: QoS 2 is not supported; publish at QoS 0 or 1`, 'qos 2');
        return callback(refusal('QoS 2 is not supported'));
      }
      if (topic.startsWith('$SYS/')) {
        refuseSet(session.id, `MQTT publish on ${topic} refused: $SYS/ topics are reserved to the broker`, 'publish refused');
        return callback(refusal('$SYS/ topic is reserved'));
      }
      if (topic.startsWith('/') || topic.endsWith('/') || topic.includes('//')) {
        refuseSet(session.id, `MQTT publish on ${topic} refused: empty topic level`, 'empty level');
        return callback(refusal('empty topic level'));
      }
      const resolved = registry.resolve(topic);
      if (resolved && resolved.reserved.setId === session.id) return take(client, session, packet as PublishPacket, resolved, callback);
      if (resolved || !options.sync) return refuseTopic(session, topic, callback);
      // In a cluster the topic may have been reserved on another node a moment ago: looked up again once this node has caught up.
      options.sync().then(
        () => {
          const again = registry.resolve(topic);
          if (again && again.reserved.setId === session.id) take(client, session, packet as PublishPacket, again, callback);
          else refuseTopic(session, topic, callback);
        },
        () => refuseTopic(session, topic, callback),
      );
    },

    // Device messages are data for the ingest alone: aedes would also hand an
    // accepted publish to every matching subscriber, so one credentials set could
    // write into another's push or output topics. Only what the platform itself
    // publishes (no publishing client: output topics, downlinks) is delivered.
    authorizeForward(_client, packet) {
      if ((packet as { clientId?: string | null }).clientId != null) return null;
      metrics?.sent.inc();
      return packet;
    },
  });

  /**
   * The error that ended a connection: a rule the client broke is logged on its
   * credentials set (wildcards or too many levels in a publish topic, which aedes
   * refuses before `authorizePublish`; a malformed or oversized packet), or in
   * the process log when the connection has no credentials set.
   */
  const connectionEnded = (client: Client | null | undefined, err: Error) => {
    if (err instanceof StalledReaderError) {
      const session = client ? sessions.get(client) : undefined;
      log.warn({ clientId: client?.id, session, unsent: err.unsent }, `MQTT consumer cut off: ${err.message}`);
      const resourceType = session?.kind === 'credentials' ? 'credentialsSet' : session?.kind === 'app' ? 'app' : null;
      if (session && resourceType) logs.write({ resourceId: session.id, resourceType, type: 'warning', priority: 'high', category: 'system', message: `MQTT connection of client ${session.clientId} closed: ${err.message}` }, 'stalled reader');
      return;
    }
    const tooLarge = err instanceof PacketTooLargeError || (err as { code?: string }).code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH';
    if (!tooLarge && (reported.has(err) || typeof (err as { code?: unknown }).code === 'string' || ORDINARY_END.test(err.message))) {
      return log.debug({ clientId: client?.id, err: err.message }, 'MQTT connection ended');
    }
    const session = client ? sessions.get(client) : undefined;
    const why = tooLarge ? (err instanceof PacketTooLargeError ? err.message : `a WebSocket message is larger than ${MAX_WS_MESSAGE_BYTES} bytes`) : err.message;
    if (session?.kind === 'credentials') {
      const wildcard = /^([+#]) is not allowed in PUBLISH$/.exec(err.message);
      const message = wildcard ? `a publish topic contains the wildcard ${wildcard[1]}, which MQTT does not allow` : why;
      refuseSet(session.id, `MQTT connection closed: ${message} (client ${session.clientId} from ${remoteOf(client!)})`, tooLarge ? 'packet too large' : wildcard ? 'wildcard publish' : 'protocol error');
    } else if (tooLarge) {
      log.warn({ clientId: client?.id, session, remote: client ? remoteOf(client) : undefined, err: why }, 'MQTT connection closed: packet too large');
    } else {
      log.info({ clientId: client?.id, session, err: err.message }, 'MQTT connection closed: protocol error');
    }
  };
  aedes.on('clientError', connectionEnded);
  aedes.on('connectionError', connectionEnded);
  // A persistence that failed (Redis in a cluster) is reported here; the broker goes on.
  (aedes as unknown as NodeJS.EventEmitter).on('error', (err: Error) => log.error({ err }, 'MQTT broker: its session store failed'));

  const sessionKeeping = keepSessions(aedes as unknown as Parameters<typeof keepSessions>[0], {
    persistence: store,
    seen: options.backends?.sessions.seen ?? new MemoryLastSeen(),
    limits,
    log,
    metrics: metrics && { dropped: metrics.sessionDrops, expired: metrics.sessionsExpired },
    // A credentials set's or an app's sessions are told in its log, where its owner looks; a user's in the process log only.
    tell: (session, what) => {
      const slash = session.indexOf('/');
      const owner = session.slice(0, slash);
      const clientId = session.slice(slash + 1);
      const resourceType = registry.credentialsSet(owner) ? 'credentialsSet' : registry.app(owner) ? 'app' : null;
      if (!resourceType) return;
      const [message, kind] =
        'dropped' in what
          ? [`MQTT session ${clientId}: ${what.dropped} queued message(s) dropped while its client was away; a session keeps the newest ${limits.queue}`, 'session queue full']
          : [`MQTT session ${clientId} ended: its client was away longer than ${limits.expiryMs / 1000} s; its next connection starts a new session and must subscribe again`, 'session expired'];
      logs.write({ resourceId: owner, resourceType, type: 'warning', priority: 'medium', category: 'system', message }, kind);
    },
    ...(options.clock ? { now: () => options.clock!().getTime() } : {}),
  });

  // An app deleted, or given a new secret, loses the connections it opened with the old one.
  const stopRevokingApps = registry.onAppRevoked((appId) => {
    for (const client of Object.values((aedes as unknown as { clients: Record<string, Client> }).clients)) {
      const session = sessions.get(client);
      if (session?.kind === 'app' && session.id === appId) client.close();
    }
  });
  // A user deleted or disabled, or whose password changed, loses the connections opened with their tokens.
  const stopRevokingUsers = registry.onUserRevoked((userId, why) => {
    const because = { deleted: 'the user was deleted', disabled: 'the user was disabled', 'password changed': 'the user changed their password', 'password reset': 'the user\'s password was reset' }[why];
    for (const client of [...(userClients.get(userId)?.keys() ?? [])]) endUserConnection(client, userId, because);
  });
  const stopRevoking = () => {
    stopRevokingApps();
    stopRevokingUsers();
    for (const clients of userClients.values()) for (const timer of clients.values()) if (timer) clearTimeout(timer);
    userClients.clear();
  };

  const open = metrics ? { tcp: metrics.connections.labels('tcp'), tls: metrics.connections.labels('tls'), ws: metrics.connections.labels('ws') } : null;
  const counted = (transport: 'tcp' | 'tls' | 'ws', conn: { once(event: 'close', listener: () => void): unknown }) => {
    if (!open) return;
    open[transport].inc();
    conn.once('close', () => open[transport].dec());
  };
  const listen = async (server: NetServer, port: number): Promise<number> => {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, options.host, () => resolve());
    });
    return (server.address() as AddressInfo).port;
  };

  // TCP and TLS connections go the same way: the packet size guard, then aedes with its logins and topic rules.
  const stallMs = options.stallMs ?? DEFAULT_STALL_MS;
  /** Every open connection, logged in or not yet (a stop ends each). */
  const conns = new Set<Duplex>();
  const track = (conn: Duplex) => {
    conns.add(conn);
    conn.once('close', () => conns.delete(conn));
  };
  const serve = (transport: 'tcp' | 'tls') => (socket: Socket) => {
    track(socket);
    counted(transport, socket);
    guardPacketSize(socket);
    guardUnsent(socket, stallMs);
    aedes.handle(socket);
  };
  const server: NetServer = createServer(serve('tcp'));
  const port = await listen(server, options.port);
  log.info({ port }, 'MQTT listening');

  let tlsServer: TlsServer | null = null;
  let tlsPort: number | null = null;
  if (options.tls) {
    tlsServer = createTlsServer({ cert: options.tls.cert, key: options.tls.key, minVersion: 'TLSv1.2', handshakeTimeout: TLS_HANDSHAKE_MS }, serve('tls'));
    let windowStart = 0;
    let loggedInWindow = 0;
    let unlogged = 0;
    // A client that refuses the handshake has often closed its socket by the time the error is reported, and a
    // closed socket no longer knows its peer: the address is taken when the connection arrives.
    const remotes = new WeakMap<Socket, string | undefined>();
    tlsServer.on('connection', (raw: Socket) => remotes.set(raw, raw.remoteAddress));
    // A failed handshake (a client that does not trust the certificate, plain MQTT on this port, an old TLS version)
    // only ends that connection. It is counted, and logged: up to TLS_REFUSALS_LOGGED a second, so a scanner cannot
    // flood the log; the next line logged says how many were left out.
    tlsServer.on('tlsClientError', (err: Error & { code?: string }, socket) => {
      const remote = socket.remoteAddress ?? remotes.get((socket as unknown as { _parent: Socket })._parent);
      socket.destroy();
      // A connection closed before it said anything (a port probe) is no refusal.
      if (err.code === 'ECONNRESET') return log.debug({ remote }, 'MQTT TLS connection closed before its handshake');
      metrics?.tlsRefused.inc();
      const now = Date.now();
      if (now - windowStart > 1000) {
        windowStart = now;
        loggedInWindow = 0;
      }
      if (++loggedInWindow > TLS_REFUSALS_LOGGED) {
        unlogged++;
        return;
      }
      log.warn({ remote, code: err.code, err: err.message, unlogged }, 'MQTT TLS handshake refused');
      unlogged = 0;
    });
    try {
      tlsPort = await listen(tlsServer, options.tls.port);
    } catch (error) {
      // The TLS port is taken: nothing of the broker stays behind.
      stopRevoking();
      await sessionKeeping.stop();
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      await new Promise<void>((resolve) => server.close(() => resolve()));
      throw error;
    }
    log.info({ port: tlsPort }, 'MQTT over TLS listening');
  }

  let wss: WebSocketServer | null = null;
  if (options.httpServer) {
    wss = new WebSocketServer({ server: options.httpServer, path: '/mqtt', maxPayload: MAX_WS_MESSAGE_BYTES });
    wss.on('connection', (ws, req) => {
      const stream = createWebSocketStream(ws);
      track(stream);
      counted('ws', ws);
      guardPacketSize(stream);
      guardUnsent(stream, stallMs);
      stream.on('error', () => stream.destroy());
      aedes.handle(stream, req);
    });
  }

  let serversClosed: Promise<void> = Promise.resolve();
  const connections = () => [...conns];
  const stopTaking = () => {
    if (!taking) return;
    taking = false;
    // No new connections; the servers' close callbacks come once the last connection has ended (`close`).
    serversClosed = Promise.all([
      new Promise<void>((resolve) => server.close(() => resolve())),
      tlsServer ? new Promise<void>((resolve) => tlsServer!.close(() => resolve())) : Promise.resolve(),
    ]).then(() => undefined);
  };

  return {
    aedes,
    port,
    tlsPort,
    publish: (topic, payload, qos = 1) =>
      new Promise<void>((resolve, reject) =>
        aedes.publish({ cmd: 'publish', topic, payload: typeof payload === 'string' ? Buffer.from(payload) : payload, qos, retain: false, dup: false }, (err) => (err ? reject(err) : resolve())),
      ),
    holdConsumers() {
      // Only the consumers': a publisher's connection corked for a whole batch would fill its buffer with PUBACKs,
      // and aedes stops reading a client whose writes wait. A connection holds at most `MAX_SUBSCRIPTIONS`, which
      // bounds this scan per connection.
      const clients = Object.values((aedes as unknown as { clients: Record<string, Client & { subscriptions: Record<string, unknown> }> }).clients);
      const conns = clients.filter((c) => Object.keys(c.subscriptions).some((t) => t.startsWith('svc/output/v2/'))).map((c) => c.conn as unknown as { cork(): void; uncork(): void });
      for (const c of conns) c.cork();
      return () => {
        for (const c of conns) c.uncork();
      };
    },
    stopTaking,
    async written(deadline) {
      // The pipeline uncorks the connections it acknowledged on at the next turn of the event loop.
      await new Promise((resolve) => setTimeout(resolve, 0));
      const unsent = () => connections().filter((c) => !c.destroyed && c.writableLength > 0);
      while (unsent().length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    },
    async close(deadline = Date.now() + END_WAIT_MS) {
      stopTaking();
      stopRevoking();
      await sessionKeeping.stop();
      // Ended from this side after what was written: a client reads its last PUBACKs, then the end, and closes;
      // cutting the connection instead could lose what it has not read yet.
      const open = connections().filter((c) => !c.destroyed);
      for (const c of open) c.end();
      const until = Math.min(deadline, Date.now() + END_WAIT_MS);
      while (open.some((c) => !c.destroyed) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20));
      for (const callback of held) callback(refusal('the platform is stopping'));
      for (const c of connections()) c.destroy();
      held.clear();
      await new Promise<void>((resolve) => aedes.close(() => resolve()));
      if (wss) {
        for (const c of wss.clients) c.terminate();
        await new Promise<void>((resolve) => wss!.close(() => resolve()));
      }
      await serversClosed;
    },
  };
}

