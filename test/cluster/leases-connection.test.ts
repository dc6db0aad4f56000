/**
 * The leadership connection dies while its heartbeat waits for an answer.
 * The connection's own 'error' event drops it first; the heartbeat's failure
 * then arrives for a connection already dropped, and must change nothing. A
 * TCP relay between the node and PostgreSQL stands for the network: it holds
 * back the server's answers, then cuts the connection.
 */
import net from 'node:net';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Leases } from '../../domain/eventstore/leases.js';
import { createTestDatabase } from '../support/cluster.js';

interface Relay {
  port: number;
  /** While true, nothing from the server reaches the client. */
  holding: boolean;
  /** Client-side sockets, newest last. */
  sockets: net.Socket[];
  close(): Promise<void>;
}

async function relayTo(socketPath: string): Promise<Relay> {
  const relay = { holding: false, sockets: [] as net.Socket[] } as Relay;
  const server = net.createServer((client) => {
    relay.sockets.push(client);
    const upstream = net.connect({ path: socketPath });
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!relay.holding) client.write(chunk);
    });
    const cut = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', cut).on('error', cut);
    upstream.on('close', cut).on('error', cut);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  relay.port = (server.address() as net.AddressInfo).port;
  relay.close = () => {
    for (const s of relay.sockets) s.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  };
  return relay;
}

const until = async (check: () => boolean, ms: number, what: string) => {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};

const test = suite('cluster: the leadership connection lost during its heartbeat');

test('given a node whose heartbeat waits for an answer, when the connection is cut, then the node waits for PostgreSQL, does not fail, and connects again', async () => {
  const url = new URL(await createTestDatabase());
  const socketPath = `${url.searchParams.get('host')}/.s.PGSQL.${url.searchParams.get('port')}`;
  const relay = await relayTo(socketPath);
  const pool = new pg.Pool({ connectionString: url.toString(), max: 2 });
  const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool }) });
  const failures: unknown[] = [];
  const onFailure = (reason: unknown) => failures.push(reason);
  process.on('unhandledRejection', onFailure);
  const leases = new Leases({ url: `postgresql://postgres@127.0.0.1:${relay.port}${url.pathname}`, db, node: 'relayed', log: pino({ level: 'silent' }), retryMs: 40 });
  try {
    await leases.start();
    assert.ok(leases.status().connected, 'connected through the relay');
    const first = relay.sockets.at(-1)!;

    // Given a heartbeat sent and its answer held back.
    relay.holding = true;
    let sent = false;
    first.once('data', () => (sent = true));
    await until(() => sent, 2_000, 'a heartbeat to be sent');

    // When the connection is cut under it.
    relay.holding = false;
    first.destroy();

    await until(() => !leases.status().connected, 2_000, 'the node to see the connection gone');
    assert.match(leases.status().waiting ?? '', /lost the leadership connection/);
    await until(() => leases.status().connected && relay.sockets.length > 1, 5_000, 'the node to connect again');
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(failures, [], 'no heartbeat failed out of the node');
  } finally {
    process.off('unhandledRejection', onFailure);
    await leases.stop();
    await relay.close();
    await db.destroy();
  }
});

test.run();
