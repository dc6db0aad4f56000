import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { connect as tcpConnect, type Socket } from 'node:net';
import { sql } from 'kysely';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, deviceOf, eventually, projected, publish } from '../ingest/support.js';
import type { GivenUser } from '../users/given.js';
import { givenTenant } from './given.js';
import { ECHO_TRANSLATOR, FUZZ_SEED, ODD_TEXT, deepNesting, echoUplinkHex, jsonText, oddJson, oddKey, oddNumber, oddText, put, runsScaled, textOf } from './fuzz.js';
import { MAX_PACKET_BYTES, MAX_PAYLOAD_BYTES } from '../../ingest/broker.js';

/**
 * Property-based fuzzing of the MQTT ingest. In each case Alice's
 * credentials set publishes hostile messages (arbitrary bytes, JSON of odd
 * shapes, NUL and lone surrogates, deep nesting, payloads at and past the
 * 256 KiB cap, topics below her reserved topic with odd levels, other sets'
 * topics, raw packets written on the socket; now and then under the client
 * id of Bob's connection) while Bob's set, another
 * tenant's, publishes valid QoS 1 messages in the same ingest batches. Then:
 * - every message of Bob's is acknowledged and stored exactly once, and his
 *   one connection stays open through every case;
 * - Bob receives nothing Alice published;
 * - the platform logs no error (a refusal is a warning on Alice's set);
 * - Alice herself recovers: a valid message of hers is stored after each
 *   case, and her device, its history and her logs still read without a 5xx.
 * Alice may be refused (PUBACK and a log entry, or her own connection closed).
 *
 * The seed is fixed (`FUZZ_SEED`; `FUZZ_RUNS_FACTOR` runs more cases); a
 * failure names the seed and the shrunk case.
 */
interface Tenant {
  user: GivenUser;
  setId: string;
  username: string;
  password: string;
  topic: string;
}

interface World {
  t: TestPlatform;
  alice: Tenant;
  bob: Tenant;
  aliceDevice: string;
  /** Bob's one connection, for the whole suite. */
  bobClient: MqttClient;
  bobClosed: boolean;
  /** What Bob's connection received (he subscribes to his own push topics). */
  bobReceived: string[];
  seq: number;
  probe: number;
  /** How many readings Alice's device had of each field after the last case, to query the stats of only the fields a case added to. */
  readings: Map<string, number>;
  /** The latest cases, named in a failure: a case can leave behind what fails a later one. */
  recent: string[];
  cases: number;
  published: number;
  started: number;
}

/** One publish of Alice's: through MQTT.js, or written as raw bytes on a socket of her own. */
interface Message {
  topic: string | Buffer;
  payload: Buffer;
  qos: 0 | 1;
  retain: boolean;
  label: string;
}
interface Case {
  /** Alice's client id: her own, or the one Bob's connection uses. */
  clientId: string;
  messages: Message[];
  /** Written as raw packets (hand-framed, any topic bytes), then optionally junk bytes after them. */
  raw: boolean;
  junk: Buffer | null;
}

const RUNS = runsScaled(150);
const SENSOR = 'alice-sensor-1';
const BOB_CLIENT_ID = 'bob-steady';
const BOB_PER_CASE = 12;

const fuzz = suite<World>('MQTT fuzzing: one tenant\'s hostile publishes never cost another tenant a message');

async function givenTenantWithSet(t: TestPlatform, name: string): Promise<Tenant> {
  const user = await givenTenant(t, name);
  const password = `${name}-mqtt-password`;
  const set = await t.call('POST', '/api/basic-credentials-sets', { token: user.token, body: { username: `${name}-set`, password } });
  assert.is(set.status, 201, set.text);
  const topic = `svc/generic/v2/${name}-plant`;
  const reserved = await t.call('POST', '/api/reserved-mqtt-topics', { token: user.token, body: { topic, basicCredentialsSetId: set.body._id } });
  assert.is(reserved.status, 201, reserved.text);
  return { user, setId: set.body._id, username: `${name}-set`, password, topic };
}

fuzz.before(async (w) => {
  w.t = await startTestPlatform({ logLevel: 'warn' });
  const t = w.t;
  w.alice = await givenTenantWithSet(t, 'alice');
  w.bob = await givenTenantWithSet(t, 'bob');
  // Alice's device exists (sub-topics update it) and decodes uplinks with a translator that reflects its input.
  const a = await connectMqtt(t, w.alice.username, w.alice.password);
  await publish(a, w.alice.topic, { seq: 0 });
  await a.endAsync();
  const device = await deviceOf(t, w.alice.topic, w.alice.user.token);
  w.aliceDevice = device._id;
  const echo = await t.call('POST', '/api/translators', { token: w.alice.user.token, body: { name: 'alice-echo', version: '1.0.0', ...ECHO_TRANSLATOR } });
  assert.is(echo.status, 201, echo.text);
  const prefs = await t.call('PUT', `/api/iotnodes/${w.aliceDevice}`, { token: w.alice.user.token, body: { translatorPreferences: [{ name: 'alice-echo', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(prefs.status, 200, prefs.text);
  // A sub-device of hers, which her uplinks may update as a gateway's do.
  const sensor = await t.call('POST', '/api/iotnodes', { token: w.alice.user.token, body: { name: 'alice sensor', secret: SENSOR } });
  assert.is(sensor.status, 201, sensor.text);

  w.bobClient = await connectMqtt(t, w.bob.username, w.bob.password, { clientId: BOB_CLIENT_ID });
  w.bobClosed = false;
  w.bobReceived = [];
  w.bobClient.on('close', () => (w.bobClosed = true));
  w.bobClient.on('message', (topic) => w.bobReceived.push(topic));
  await w.bobClient.subscribeAsync(`svc/push/v1/${w.bob.setId}/#`, { qos: 1 });
  w.seq = 0;
  w.probe = 0;
  w.readings = new Map();
  w.recent = [];
  w.cases = 0;
  w.published = 0;
  w.started = Date.now();
});

fuzz.after(async (w) => {
  await w.bobClient?.endAsync();
  await w.t?.stop();
});

/** A level below Alice's topic that a topic parser, a path into her device or a stats field name could trip on. */
const oddLevel: fc.Arbitrary<string> = fc.oneof(
  fc.stringMatching(/^[a-z][a-z0-9]{0,7}$/),
  fc.constantFrom(...ODD_TEXT.filter((s) => s !== ''), '__proto__', 'constructor', 'a.b', '.', '..', ' ', '$', '+', '#', 'x'.repeat(300), '😀', 'encodedData', 'secret', 'name', '_id', 'lnglat'),
);

/** Topics for Alice: her own, below it with odd levels, deep, empty levels, wildcards, other sets' topics and system topics. */
function topicOf(w: World): fc.Arbitrary<string> {
  const mine = w.alice.topic;
  return fc.oneof(
    { arbitrary: fc.constant(mine), weight: 6 },
    { arbitrary: fc.array(oddLevel, { minLength: 1, maxLength: 3 }).map((levels) => `${mine}/${levels.join('/')}`), weight: 6 },
    { arbitrary: fc.constantFrom(`${mine}/${'a/'.repeat(300)}b`, `${mine}//x`, `${mine}/`, `/${mine}`, `${mine}/${'l'.repeat(60_000)}`), weight: 1 },
    {
      arbitrary: fc.constantFrom(w.bob.topic, `${w.bob.topic}/x`, `svc/push/v1/${w.bob.setId}/down`, `svc/output/v2/${w.bob.user.id}/iotnode/x`, '$SYS/broker', 'svc/generic/v2', 'svc/generic/v2/unreserved', '#', `${mine}/+`),
      weight: 1,
    },
  );
}

/** A JSON object payload with `bytes` total bytes (a padding field sized to fit). */
const sized = (bytes: number) => {
  const shell = '{"pad":""}';
  return Buffer.from(`{"pad":"${'a'.repeat(Math.max(0, bytes - shell.length))}"}`);
};

/** Payload bytes: valid reports, odd JSON, platform fields, uplinks for the translator, bytes that are not JSON, sizes around the caps. */
const payloadOf: fc.Arbitrary<{ payload: Buffer; label: string }> = fc.oneof(
  {
    arbitrary: fc.dictionary(fc.stringMatching(/^[a-z][A-Za-z0-9]{0,9}$/), fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.string({ maxLength: 16 }), fc.boolean()), { maxKeys: 5, noNullPrototype: true }).map((o) => ({ payload: Buffer.from(JSON.stringify(o)), label: 'report' })),
    weight: 3,
  },
  {
    arbitrary: fc.dictionary(fc.oneof(fc.stringMatching(/^[a-z]{1,6}$/), oddKey), oddJson, { minKeys: 1, maxKeys: 4, noNullPrototype: true }).map((o) => {
      const owned = {};
      for (const k of Object.keys(o)) put(owned, k, (o as Record<string, unknown>)[k]);
      return { payload: Buffer.from(jsonText(owned)), label: 'odd object' };
    }),
    weight: 4,
  },
  { arbitrary: oddJson.map((v) => ({ payload: Buffer.from(jsonText(v)), label: 'odd json' })), weight: 2 },
  { arbitrary: fc.tuple(oddKey, fc.oneof(oddNumber(), deepNesting)).map(([k, v]) => ({ payload: Buffer.from(jsonText(put({}, k, v))), label: 'odd number or nesting' })), weight: 2 },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('name', 'secret', '_id', 'connector', 'rabbitRouting', 'createdAt', 'translatorPreferences', 'lnglat', 'deviceModelName'), oddJson)
      .map(([k, v]) => ({ payload: Buffer.from(jsonText({ [k]: v })), label: 'platform field' })),
    weight: 2,
  },
  {
    arbitrary: fc
      .oneof(
        echoUplinkHex([SENSOR, 'svc/generic/v2/bob-plant']).map((hexEncoded) => ({ hexEncoded, port: 1 })),
        fc.record({ hexEncoded: fc.oneof(oddText().map(textOf), fc.constant('zz'), fc.constant('a')), port: fc.oneof(fc.integer({ min: -1, max: 70_000 }), oddJson) }),
      )
      .map((encodedData) => ({ payload: Buffer.from(jsonText({ encodedData })), label: 'uplink' })),
    weight: 5,
  },
  { arbitrary: fc.uint8Array({ maxLength: 512 }).map((b) => ({ payload: Buffer.from(b), label: 'bytes' })), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      Buffer.from('{"a":"\u0000"}'),
      Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]),
      Buffer.from('\ufeff{"a":1}'),
      Buffer.from('{"a":1}', 'utf16le'),
      Buffer.from('{"a":1,"a":{"b":2}}'),
      Buffer.from('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}'),
      Buffer.from(''),
      Buffer.from('null'),
      Buffer.from('[{"a":1}]'),
    ).map((payload) => ({ payload, label: 'odd bytes' })),
    weight: 2,
  },
  {
    arbitrary: fc
      .constantFrom(MAX_PAYLOAD_BYTES - 1, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_BYTES + 1, MAX_PACKET_BYTES - 1024, MAX_PACKET_BYTES + 1, 1024 * 1024)
      .map((n) => ({ payload: sized(n), label: `${n} bytes` })),
    weight: 1,
  },
);

const messageOf = (w: World): fc.Arbitrary<Message> =>
  fc.record({ topic: topicOf(w), p: payloadOf, qos: fc.constantFrom<0 | 1>(1, 1, 1, 0), retain: fc.boolean() }).map(({ topic, p, qos, retain }) => ({
    topic,
    payload: p.payload,
    qos,
    retain,
    label: `${p.label} on ${topic.length > 80 ? `${topic.slice(0, 80)}…` : topic}`,
  }));

/** Topic bytes that MQTT.js would not write: NUL, invalid UTF-8, wildcards. */
const rawTopicOf = (w: World): fc.Arbitrary<string | Buffer> =>
  fc.oneof(
    topicOf(w),
    fc.constantFrom(Buffer.from(`${w.alice.topic}/\u0000x`), Buffer.concat([Buffer.from(`${w.alice.topic}/`), Buffer.from([0xed, 0xa0, 0x80])]), Buffer.concat([Buffer.from(`${w.alice.topic}/`), Buffer.from([0xff, 0xfe])]), Buffer.from('')),
  );

function caseOf(w: World): fc.Arbitrary<Case> {
  const clientId = fc.oneof({ arbitrary: fc.constant(''), weight: 4 }, { arbitrary: fc.constant(BOB_CLIENT_ID), weight: 1 });
  const client = fc.tuple(clientId, fc.array(messageOf(w), { minLength: 1, maxLength: 5 })).map(([id, messages]): Case => ({ clientId: id, messages, raw: false, junk: null }));
  const raw = fc
    .tuple(clientId, fc.array(fc.tuple(messageOf(w), rawTopicOf(w)).map(([m, topic]) => ({ ...m, topic })), { minLength: 1, maxLength: 4 }), fc.option(fc.uint8Array({ minLength: 1, maxLength: 64 }).map((b) => Buffer.from(b)), { nil: null, freq: 3 }))
    .map(([id, messages, junk]): Case => ({ clientId: id, messages, raw: true, junk }));
  return fc.limitShrink(
    fc.oneof({ arbitrary: client, weight: 4 }, { arbitrary: raw, weight: 1 }).map((c) =>
      Object.defineProperty(c, fc.toStringMethod, {
        value: () => `${c.raw ? 'raw ' : ''}${c.clientId ? `as client ${c.clientId} ` : ''}[${c.messages.map((m) => `${m.label} (qos ${m.qos}${m.retain ? ', retain' : ''}): ${JSON.stringify(m.payload.subarray(0, 120).toString('utf8'))}${m.payload.length > 120 ? `… ${m.payload.length} bytes` : ''}`).join(' | ')}]${c.junk ? ` then junk ${c.junk.toString('hex')}` : ''}`,
      }),
    ),
    30,
  );
}

// ---- raw MQTT 3.1.1 framing, for bytes MQTT.js would not send ----

const remainingLength = (n: number): Buffer => {
  const out: number[] = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) byte |= 0x80;
    out.push(byte);
  } while (n > 0);
  return Buffer.from(out);
};
const str = (s: string | Buffer) => {
  const b = typeof s === 'string' ? Buffer.from(s) : s;
  const len = Buffer.alloc(2);
  len.writeUInt16BE(Math.min(b.length, 0xffff));
  return Buffer.concat([len, b.subarray(0, 0xffff)]);
};
const packet = (header: number, body: Buffer) => Buffer.concat([Buffer.from([header]), remainingLength(body.length), body]);
const connectPacket = (clientId: string, username: string, password: string) =>
  packet(0x10, Buffer.concat([str('MQTT'), Buffer.from([4, 0xc2, 0, 30]), str(clientId), str(username), str(password)]));
const publishPacket = (m: Message, id: number) => {
  const pid = Buffer.alloc(2);
  pid.writeUInt16BE(id);
  return packet(0x30 | (m.qos << 1) | (m.retain ? 1 : 0), Buffer.concat([str(m.topic), m.qos ? pid : Buffer.alloc(0), m.payload]));
};

/** Alice on a raw socket: CONNECT, her packets, optional junk; resolves when every QoS 1 publish is answered or the socket closes. */
async function sendRaw(w: World, c: Case): Promise<void> {
  const socket: Socket = tcpConnect(w.t.mqttPort, '127.0.0.1');
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  let received = Buffer.alloc(0);
  socket.on('data', (d: Buffer) => (received = Buffer.concat([received, d])));
  socket.write(connectPacket(c.clientId || `alice-raw-${w.cases}`, w.alice.username, w.alice.password));
  const expected = c.messages.filter((m) => m.qos === 1).length;
  // CONNACK is 4 bytes, each PUBACK 4 more.
  const answered = (async () => {
    while (received.length < 4 + 4 * expected && !socket.destroyed) await new Promise((r) => setTimeout(r, 10));
  })();
  c.messages.forEach((m, i) => socket.write(publishPacket(m, i + 1)));
  if (c.junk) socket.write(c.junk);
  await Promise.race([Promise.all([answered]), closed, new Promise((r) => setTimeout(r, 5000))]);
  socket.destroy();
}

/** Alice through MQTT.js: every message at once; a refused one may close her connection. */
async function sendClient(w: World, c: Case): Promise<void> {
  let alice: MqttClient;
  try {
    alice = await connectMqtt(w.t, w.alice.username, w.alice.password, { clientId: c.clientId || `alice-${w.cases}` });
  } catch (err) {
    throw new Error(`Alice could not connect: ${(err as Error).message}`);
  }
  alice.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => alice.once('close', () => resolve()));
  const sends = c.messages.map((m) => alice.publishAsync(typeof m.topic === 'string' ? m.topic : m.topic.toString(), m.payload, { qos: m.qos, retain: m.retain }).catch(() => undefined));
  await Promise.race([Promise.all(sends), closed, new Promise((r) => setTimeout(r, 5000))]);
  alice.end(true);
}

const storedSeqs = async (w: World, topic: string): Promise<Map<number, number>> => {
  const { rows } = await sql<{ seq: number; n: number }>`SELECT (data->'payload'->>'seq')::int AS seq, count(*)::int AS n FROM es.events
    WHERE type = 'DeviceReported' AND data->>'topic' = ${topic} AND data->'payload' ? 'seq' GROUP BY 1`.execute(w.t.platform.deps.db);
  return new Map(rows.map((r) => [r.seq, r.n]));
};

/** How many readings Alice's device has of each field. */
const readingsOf = async (w: World): Promise<Map<string, number>> => {
  const { rows } = await sql<{ field: string; n: number }>`SELECT f.field, count(*)::int AS n FROM device_history h CROSS JOIN LATERAL jsonb_object_keys(h.fields) AS f(field)
    WHERE h.device_id = ${w.aliceDevice} GROUP BY 1`.execute(w.t.platform.deps.db);
  return new Map(rows.map((r) => [r.field, r.n]));
};

/** Runs a case; a failure carries the errors the platform logged meanwhile, which name the cause. */
async function check(w: World, c: Case): Promise<void> {
  const logsBefore = w.t.logs.length;
  try {
    await runCase(w, c, logsBefore);
  } catch (err) {
    const logged = w.t.logs.slice(logsBefore).filter((l) => Number(l.level) >= 50);
    const lines = [...new Set(logged.map((l) => `  ${l.msg}: ${JSON.stringify((l.err as { message?: string } | undefined)?.message ?? l.err ?? '').slice(0, 400)}`))];
    if (lines.length && err instanceof Error) err.message += `\nlogged meanwhile:\n${lines.slice(0, 5).join('\n')}`;
    if (err instanceof Error) err.message += `\nthe cases before it, latest last:\n${w.recent.map((r) => `  ${r}`).join('\n')}`;
    throw err;
  } finally {
    w.recent = [...w.recent.slice(-2), fc.stringify(c)];
  }
}

async function runCase(w: World, c: Case, logsBefore: number): Promise<void> {
  w.cases++;
  w.published += c.messages.length;
  const bobSeqs = Array.from({ length: BOB_PER_CASE }, () => ++w.seq);
  // Bob's messages go out around Alice's, so both land in the same ingest batches.
  const deadline = <T>(p: Promise<T>, what: string) => Promise.race([p, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`${what}: no PUBACK within 15 s`)), 15_000))]);
  const half = BOB_PER_CASE / 2;
  const bobAcks = bobSeqs.slice(0, half).map((seq) => deadline(publish(w.bobClient, w.bob.topic, { seq }), `Bob's message ${seq}`));
  const alice = c.raw ? sendRaw(w, c) : sendClient(w, c);
  bobAcks.push(...bobSeqs.slice(half).map((seq) => deadline(publish(w.bobClient, w.bob.topic, { seq }), `Bob's message ${seq}`)));
  await alice;
  await Promise.all(bobAcks);

  assert.not.ok(w.bobClosed, "Bob's connection stays open");
  const stored = await storedSeqs(w, w.bob.topic);
  for (const seq of bobSeqs) assert.is(stored.get(seq) ?? 0, 1, `Bob's message ${seq} is stored exactly once`);
  assert.equal(w.bobReceived, [], 'Bob receives nothing Alice published');

  // Alice recovers: a valid message of hers is stored, and what she stored reads back without a 5xx.
  const probe = ++w.probe;
  const again = await connectMqtt(w.t, w.alice.username, w.alice.password, { clientId: `alice-probe-${probe}` });
  await deadline(publish(again, w.alice.topic, { probe }), "Alice's probe");
  await again.endAsync();
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeviceReported' AND data->>'topic' = ${w.alice.topic}
    AND data->'payload'->>'probe' = ${String(probe)}`.execute(w.t.platform.deps.db);
  assert.is(rows[0]!.n, 1, "Alice's valid message after the case is stored");
  await projected(w.t);
  const token = w.alice.user.token;
  for (const path of [`/api/iotnodes/${w.aliceDevice}`, `/api/iotnodes/${w.aliceDevice}/stats/fields`, `/api/iotnodes?fields=name,echo,text`, `/api/logs?resourceId=${w.alice.setId}&limit=5`, `/api/logs?resourceId=${w.aliceDevice}&limit=5`]) {
    const res = await w.t.call('GET', path, { token });
    assert.ok(res.status < 500, `GET ${path} after the case answered ${res.status}: ${res.text.slice(0, 200)}`);
  }
  const fields = await w.t.call('GET', `/api/iotnodes/${w.aliceDevice}/stats/fields`, { token });
  // A field's stats (the last day of its readings; every reading is the platform's receive time, so in the past)
  // change only with a new reading of it: those of this case are queried, the rest answered as after an earlier case.
  const readings = await readingsOf(w);
  const changed = ((fields.body ?? []) as string[]).slice(0, 20).filter((field) => readings.get(field) !== w.readings.get(field));
  w.readings = readings;
  for (const field of changed) {
    const res = await w.t.call('GET', `/api/iotnodes/${w.aliceDevice}/stats?measurement=${encodeURIComponent(field)}&distance=60&calculation=last`, { token });
    assert.ok(res.status < 500, `stats of ${JSON.stringify(field)} answered ${res.status}: ${res.text.slice(0, 200)}`);
  }

  const errors = w.t.logs.slice(logsBefore).filter((l) => Number(l.level) >= 50);
  assert.equal(errors.map((l) => `${l.msg}: ${JSON.stringify(l.err ?? '').slice(0, 300)}`), [], 'the platform logged no error');
}

fuzz('Alice\'s hostile publishes are refused alone: Bob\'s messages are all acknowledged and stored exactly once, his connection stays open, and Alice recovers', async (w) => {
  await fc.assert(fc.asyncProperty(caseOf(w), (c) => check(w, c)), { seed: FUZZ_SEED, numRuns: RUNS, includeErrorInReport: true });
  const { rows } = await sql<{ reports: number; sensor: number }>`SELECT count(*)::int AS reports, count(*) FILTER (WHERE data->>'id' <> ${w.aliceDevice})::int AS sensor
    FROM es.events WHERE type = 'DeviceReported' AND metadata->>'actor' = ${`credentials:${w.alice.setId}`} AND NOT data->'payload' ? 'probe'`.execute(w.t.platform.deps.db);
  console.log(`  fuzz-mqtt: ${w.cases} cases, ${w.published} hostile publishes (${rows[0]!.reports} stored as reports, ${rows[0]!.sensor} of them sub-device updates), ${w.seq} of Bob's, in ${((Date.now() - w.started) / 1000).toFixed(1)} s (seed ${FUZZ_SEED})`);
});

fuzz('Alice\'s refusals are logged on her own set, and none on Bob\'s', async (w) => {
  await eventually(async () => {
    const logs = await w.t.call('GET', `/api/logs?resourceId=${w.alice.setId}&limit=1000`, { token: w.alice.user.token });
    return (logs.body.logs as { message: string }[]).some((l) => /not stored|refused|closed/.test(l.message));
  }, 10_000, "a refusal logged on Alice's set");
  const bobLogs = await w.t.call('GET', `/api/logs?resourceId=${w.bob.setId}&limit=1000`, { token: w.bob.user.token });
  assert.equal((bobLogs.body.logs as { message: string }[]).map((l) => l.message), []);
});

fuzz.run();
