import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { sql } from 'kysely';
import { RawPublisher } from '../support/rawMqtt.js';
import { createTestDatabase } from '../support/cluster.js';
import { startTestPlatform } from '../support/platform.js';
import { givenProvider, projected } from './support.js';

/**
 * The platform as its own process (`node --import tsx api/main.ts`), killed
 * with SIGKILL in the middle of a QoS 1 burst and started again on the same
 * database: every acknowledged message is stored, and once the publisher
 * sends its unacknowledged messages again (same client id and packet ids,
 * DUP set, as MQTT requires), every message is stored exactly once.
 */
const BURST = 3000;
const KILL_AFTER_ACKS = 300;
const ROOT = new URL('../..', import.meta.url).pathname;

interface Running {
  child: ChildProcess;
  http: number;
  mqtt: number;
}

function startPlatform(env: Record<string, string>): Promise<Running> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'api/main.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let http = 0;
    let mqtt = 0;
    let buffer = '';
    let errors = '';
    child.stderr!.on('data', (d) => (errors += d));
    child.stdout!.on('data', (d) => {
      buffer += d;
      let nl;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as { msg?: string; port?: number };
          if (entry.msg === 'HTTP listening') http = entry.port!;
          if (entry.msg === 'MQTT listening') mqtt = entry.port!;
          if (http && mqtt) resolve({ child, http, mqtt });
        } catch {
          // not a log line
        }
      }
    });
    child.on('exit', (code) => reject(new Error(`platform exited with ${code}: ${errors}`)));
  });
}

async function waitFor(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const kill = suite('Durability: SIGKILL mid-burst');

kill('when the platform is killed mid-burst and restarted, then every acknowledged message is stored, and after redelivery each exactly once', async () => {
  const databaseUrl = await createTestDatabase();
  const env = {
    DATABASE_URL: databaseUrl,
    PORT: '0',
    MQTT_PORT: '0',
    DATA_DIR: mkdtempSync(join(tmpdir(), 'sigkill-')),
    JWT_SECRET: 'sigkill-test-secret-that-is-long-enough-0123456789',
    ADMIN_USERNAME: 'admin',
    ADMIN_PASSWORD: 'admin-password-1',
    LOG_LEVEL: 'info',
  };
  let first: Running | null = await startPlatform(env);
  let second: Running | null = null;
  const db = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  try {
    const base = `http://127.0.0.1:${first.http}`;
    const call = async (path: string, body: unknown, token?: string) => {
      const res = await fetch(base + path, { method: 'POST', headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
      return res.json() as Promise<Record<string, string>>;
    };
    const { token } = await call('/api/auth/local', { username: 'admin', password: 'admin-password-1' });
    const set = await call('/api/basic-credentials-sets', { username: 'burst', password: 'burst-password' }, token);
    const topic = 'svc/generic/v2/burst/device';
    await call('/api/reserved-mqtt-topics', { topic, basicCredentialsSetId: set._id }, token);

    const publisher = new RawPublisher(first.mqtt);
    await publisher.connect('burst', 'burst-password');
    for (let seq = 1; seq <= BURST; seq++) publisher.publish(seq, topic, JSON.stringify({ seq }), false);
    await waitFor(() => publisher.acked.size >= KILL_AFTER_ACKS, 30_000, 'the first acknowledgements');
    first.child.kill('SIGKILL');
    await new Promise((r) => first!.child.once('exit', r));
    const ackedBeforeKill = new Set(publisher.acked);
    publisher.close();
    first = null;

    const storedSeqs = async () =>
      (await db.query<{ seq: number }>(`SELECT (data->'payload'->>'seq')::int AS seq FROM es.events WHERE type = 'DeviceReported'`)).rows.map((r) => r.seq);

    second = await startPlatform(env);
    const afterRestart = await storedSeqs();
    const stored = new Set(afterRestart);
    assert.is(stored.size, afterRestart.length, 'no message stored twice');
    for (const seq of ackedBeforeKill) assert.ok(stored.has(seq), `acknowledged message ${seq} is stored`);
    assert.ok(ackedBeforeKill.size < BURST, 'the kill happened mid-burst');

    // The publisher sends what was not acknowledged again, with the same packet ids: half with DUP set, as MQTT asks, and half
    // with DUP clear, as MQTT.js 5 does after a reconnect. Both are recognised as re-sends.
    const again = new RawPublisher(second.mqtt);
    await again.connect('burst', 'burst-password');
    for (let seq = 1; seq <= BURST; seq++) if (!ackedBeforeKill.has(seq)) again.publish(seq, topic, JSON.stringify({ seq }), seq % 2 === 0);
    await waitFor(() => again.acked.size === BURST - ackedBeforeKill.size, 60_000, 'the redelivered messages to be acknowledged');
    again.close();
    const final = await storedSeqs();
    assert.is(final.length, BURST, `every message exactly once (stored before the kill without an answer: ${afterRestart.length - ackedBeforeKill.size})`);
    assert.is(new Set(final).size, BURST);
  } finally {
    first?.child.kill('SIGKILL');
    if (second) {
      second.child.kill('SIGTERM');
      await new Promise((r) => second!.child.once('exit', r));
    }
    await db.end();
  }
});

kill('when a message is redelivered with DUP set, then it is stored once, also across a restart; on the same connection a reused packet id without DUP is a new message; on a new connection it is a re-send', async () => {
  const databaseUrl = await createTestDatabase();
  const topic = 'svc/generic/v2/redelivery/device';
  let t = await startTestPlatform({ databaseUrl });
  const sendAndWait = async (p: RawPublisher, dup: boolean) => {
    p.acked.clear();
    p.publish(7, topic, JSON.stringify({ seq: 1 }), dup);
    await waitFor(() => p.acked.has(7), 5000, 'the acknowledgement');
  };
  const reports = async () =>
    Number((await t.platform.deps.db.selectFrom('device_history').select((eb) => eb.fn.countAll<number>().as('n')).where(sql<boolean>`fields ? 'seq'`).executeTakeFirst())?.n ?? 0);
  try {
    await givenProvider(t, 'redeliver', [topic]);
    let p = new RawPublisher(t.mqttPort);
    await p.connect('redeliver', 'redeliver-password');
    await sendAndWait(p, false);
    await sendAndWait(p, true);
    await waitFor(async () => (await reports()) >= 1, 5000, 'the first report');
    await projected(t);
    assert.is(await reports(), 1, 'a redelivery is not stored again');
    await sendAndWait(p, false);
    await waitFor(async () => (await reports()) >= 2, 5000, 'the second report');
    p.close();
    await t.stop();
    t = await startTestPlatform({ databaseUrl });
    p = new RawPublisher(t.mqttPort);
    await p.connect('redeliver', 'redeliver-password');
    await sendAndWait(p, true);
    await projected(t);
    assert.is(await reports(), 2, 'a redelivery after a restart is not stored again');
    p.close();
    p = new RawPublisher(t.mqttPort);
    await p.connect('redeliver', 'redeliver-password');
    await sendAndWait(p, false);
    p.close();
    await projected(t);
    assert.is(await reports(), 2, 'a re-send with DUP clear on a new connection is not stored again');
  } finally {
    await t.stop();
  }
});

kill.run();
