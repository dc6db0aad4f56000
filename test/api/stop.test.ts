/**
 * A stop (what SIGTERM runs) finishes what is under way before it closes
 * anything: the HTTP requests being answered, with the projection runner
 * they wait for, and the MQTT messages the ingest pipeline was given, whose
 * PUBACKs reach their publishers before the connections end.
 */
import net from 'node:net';
import pg from 'pg';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, givenProvider, publish } from '../ingest/support.js';

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One HTTP/1.1 connection: `send` writes a request (without waiting for the answers before it); `answers` fill as they arrive. */
function connection(port: number, first: string): { answers: Answer[]; send(request: string): void; closed: Promise<void> } {
  const answers: Answer[] = [];
  let buffer = Buffer.alloc(0);
  const socket = net.connect(port, '127.0.0.1', () => socket.write(first));
  socket.on('data', (chunk) => {
    buffer = Buffer.concat([buffer, chunk]);
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end < 0) return;
      const [statusLine, ...lines] = buffer.subarray(0, end).toString('latin1').split('\r\n');
      const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
      const length = Number(headers['content-length'] ?? 0);
      if (buffer.length < end + 4 + length) return;
      answers.push({ status: Number(statusLine!.split(' ')[1]), headers, body: buffer.subarray(end + 4, end + 4 + length).toString('utf8') });
      buffer = buffer.subarray(end + 4 + length);
    }
  });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => undefined);
  return { answers, send: (request) => socket.write(request), closed };
}

const post = (path: string, token: string, body: unknown) => {
  const text = JSON.stringify(body);
  return `POST ${path} HTTP/1.1\r\nHost: platform\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\n\r\n${text}`;
};
const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: platform\r\n\r\n`;

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', () => resolve(true));
  });

/** A transaction of another session holding `table` exclusively: the projection runner's batch that writes it waits. */
async function holdTable(url: string, table: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: url });
  client.on('error', () => undefined);
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  return {
    async release() {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}

async function count(url: string, query: string, values: unknown[] = []): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query<{ n: string }>(query, values)).rows[0]!.n);
  } finally {
    await client.end();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------

const http = suite('stop: HTTP requests under way');

http('given a REST write that waits for the read models and a health request behind it on its connection, when the platform stops, then the write is answered once the read models have it, health answers 503 stopping, and no new connection is taken meanwhile', async () => {
  const t = await startTestPlatform({ logLevel: 'silent' });
  const url = t.platform.deps.config.databaseUrl!;
  const port = t.platform.httpPort;
  const lock = await holdTable(url, 'usergroups');
  let stopped = false;
  try {
    // Given a write whose read-your-writes waits for the runner, held back by the lock,
    const client = connection(port, post('/api/usergroups', t.adminToken, { name: 'in flight at the stop' }));
    await sleep(500);
    assert.equal(client.answers, [], 'the write is under way');

    // when the platform stops, and a health request follows the write on its connection,
    const stopping = t.stop().then(() => void (stopped = true));
    await sleep(300);
    client.send(get('/api/health'));
    assert.ok(await refused(port), 'a new connection is refused once the stop began');
    assert.not.ok(stopped, 'the stop waits for the request under way');
    // and the read models can go on a moment later,
    await lock.release();
    await stopping;

    // then the write was answered with its result, and health said the node is stopping.
    await client.closed;
    assert.is(client.answers.length, 2, JSON.stringify(client.answers));
    const [write, health] = client.answers as [Answer, Answer];
    assert.is(write.status, 201, write.body);
    assert.is(JSON.parse(write.body).name, 'in flight at the stop');
    assert.is(health.status, 503);
    assert.is(JSON.parse(health.body).status, 'stopping');
    assert.is(health.headers.connection, 'close');
    assert.is(await count(url, `SELECT count(*) AS n FROM usergroups WHERE name = $1`, ['in flight at the stop']), 1, 'the read models have the group');
  } finally {
    await lock.release();
    if (!stopped) await t.stop().catch(() => undefined);
  }
});

http('given a REST write that waits past the stop\'s grace, when the platform stops, then its connection is cut at the end of the grace and the stop goes on', async () => {
  const t = await startTestPlatform({ logLevel: 'silent' }, { stopGraceMs: 800 });
  const url = t.platform.deps.config.databaseUrl!;
  const lock = await holdTable(url, 'usergroups');
  try {
    const client = connection(t.platform.httpPort, post('/api/usergroups', t.adminToken, { name: 'past the grace' }));
    await sleep(300);
    const began = Date.now();
    const stopping = t.stop();
    await client.closed;
    const after = Date.now() - began;
    assert.equal(client.answers, [], 'nothing was answered');
    assert.ok(after >= 700 && after < 5000, `cut ${after} ms after the stop began (grace 800 ms)`);
    await lock.release();
    await stopping;
  } finally {
    await lock.release();
  }
});

http.run();

// ---------------------------------------------------------------------------

const mqtt = suite('stop: MQTT messages the pipeline was given');

mqtt('given a QoS 1 message whose batch waits for the database, when the platform stops, then its publisher gets the PUBACK before the connection ends, the message is stored once, and a message published during the stop is neither acknowledged nor stored', async () => {
  const t: TestPlatform = await startTestPlatform({ logLevel: 'silent' });
  const url = t.platform.deps.config.databaseUrl!;
  const topic = 'svc/generic/v2/stopping/meter';
  const provider = await givenProvider(t, 'stopping-set', [topic]);
  const device = await connectMqtt(t, provider.username, provider.password, { clientId: 'stopping-device', clean: false });
  await publish(device, topic, { n: 0 });
  const stored = () => count(url, `SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported'`);
  assert.is(await stored(), 1);

  // Given a message whose batch waits: the append is held by a lock on the streams table.
  const lock = await holdTable(url, 'es.streams');
  let stopped = false;
  try {
    const events: string[] = [];
    device.on('close', () => events.push('closed'));
    device.on('error', () => undefined);
    void publish(device, topic, { n: 1 }).then(() => events.push('puback 1'), (err: Error) => events.push(`failed 1: ${err.message}`));
    await sleep(300);

    // When the platform stops, and a message comes during the stop,
    const stopping = t.stop().then(() => void (stopped = true));
    await sleep(300);
    void publish(device, topic, { n: 2 }).then(() => events.push('puback 2'), (err: Error) => events.push(`failed 2: ${err.message}`));
    await sleep(300);
    assert.equal(events, [], 'nothing is acknowledged while the batch waits');
    // and the batch can go on a moment later,
    await lock.release();
    await stopping;
    await sleep(200);

    // then the waiting message was acknowledged before the connection ended; the one sent during the stop was not.
    assert.equal(events, ['puback 1', 'closed'], events.join(', '));
    const payloads = await count(url, `SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported' AND data->'payload'->>'n' = '1'`);
    assert.is(payloads, 1, 'the acknowledged message is stored once');
    assert.is(await count(url, `SELECT count(*) AS n FROM es.events WHERE type = 'DeviceReported' AND data->'payload'->>'n' = '2'`), 0, 'the message sent during the stop is not stored');
  } finally {
    await lock.release();
    device.end(true);
    if (!stopped) await t.stop().catch(() => undefined);
  }
});

mqtt.run();
