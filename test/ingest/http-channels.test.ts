import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { HTTP_QUEUE } from '../../reactors/channels/http.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from './support.js';

const ROOT = 'svc/generic/v2/hooks';

interface Delivery {
  at: number;
  status: number;
  device: string;
  seq: number;
}

/** A local HTTP receiver that answers 500 to its first `failures` requests, then 200. */
async function receiver(failures = 0) {
  const requests: Delivery[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      const body = JSON.parse(text);
      const status = requests.length < failures ? 500 : 200;
      requests.push({ at: Date.now(), status, device: body.iotnode._id, seq: body.diff.seq });
      res.statusCode = status;
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    requests,
    /** The seq values answered 200, per device, in the order they arrived. */
    delivered(device: string) {
      return requests.filter((r) => r.status === 200 && r.device === device && r.seq !== undefined).map((r) => r.seq);
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i + 1);

/** The checkpoint of one http channel, and the position of a stored report, as comparable [commit, prepare] pairs. */
async function checkpointOf(t: TestPlatform, channelId: string): Promise<[bigint, bigint] | null> {
  const { rows } = await sql<{ c: string; p: string }>`SELECT commit_position::text AS c, prepare_position::text AS p FROM es.checkpoints WHERE name = ${`channels-http:${channelId}`}`.execute(t.platform.deps.db);
  return rows[0] ? [BigInt(rows[0].c), BigInt(rows[0].p)] : null;
}
async function positionOf(t: TestPlatform, device: string, seq: number): Promise<[bigint, bigint]> {
  const { rows } = await sql<{ c: string; p: string }>`SELECT transaction_id::text AS c, global_position::text AS p FROM es.events
    WHERE stream_id = ${`device-${device}`} AND type = 'DeviceReported' AND (data->'payload'->>'seq')::int = ${seq}`.execute(t.platform.deps.db);
  return [BigInt(rows[0]!.c), BigInt(rows[0]!.p)];
}
const before = (a: [bigint, bigint], b: [bigint, bigint]) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

const hooks = suite<{ t: TestPlatform; p: Provider; a: string; b: string }>('http channels deliver independently of each other');

hooks.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'hooks', [`${ROOT}/a`, `${ROOT}/b`]);
  const c = await connectMqtt(ctx.t, ctx.p.username, ctx.p.password);
  await publish(c, `${ROOT}/a`, { on: true });
  await publish(c, `${ROOT}/b`, { on: true });
  await c.endAsync();
  ctx.a = (await deviceOf(ctx.t, `${ROOT}/a`))._id;
  ctx.b = (await deviceOf(ctx.t, `${ROOT}/b`))._id;
});
hooks.after(async (ctx) => {
  await ctx.t.stop();
});

hooks('given two http channels on the same devices, when one receiver fails for a while, then the other receives at once and the failing one later gets every message in order', async ({ t, p, a, b }) => {
  const group = await t.call('POST', '/api/devicegroups', { body: { name: 'hooked', devices: [a, b] } });
  assert.is(group.status, 201, group.text);
  // Four failed attempts for each device's first message: about 3.75 s of back-off before its fifth and last attempt succeeds.
  const failing = await receiver(8);
  const prompt = await receiver();
  const channels: string[] = [];
  for (const r of [failing, prompt]) {
    const ch = await t.call('POST', '/api/channels', { body: { deviceGroup: group.body._id, http: { url: r.url } } });
    assert.is(ch.status, 201, ch.text);
    channels.push(ch.body._id as string);
  }

  const c = await connectMqtt(t, p.username, p.password);
  const started = Date.now();
  await Promise.all(range(5).flatMap((seq) => [publish(c, `${ROOT}/a`, { seq }), publish(c, `${ROOT}/b`, { seq })]));

  await eventually(async () => prompt.delivered(a).length === 5 && prompt.delivered(b).length === 5, 10_000, 'the prompt receiver to get all 10 messages');
  const promptTook = Date.now() - started;
  assert.is(failing.requests.filter((r) => r.status === 200).length, 0, `the other receiver is still failing when the prompt one has everything (${promptTook} ms)`);
  assert.ok(failing.requests.length >= 1, 'the failing receiver was tried');
  assert.equal(prompt.delivered(a), range(5));
  assert.equal(prompt.delivered(b), range(5));
  // The failing channel's checkpoint stays before its first undelivered message.
  const held = await checkpointOf(t, channels[0]!);
  assert.ok(held, 'the failing channel has a checkpoint');
  const first = await positionOf(t, a, 1);
  assert.ok(before(held!, first), `checkpoint ${held} is before the undelivered message at ${first}`);

  await eventually(async () => failing.delivered(a).length >= 5 && failing.delivered(b).length >= 5, 10000, 'the recovered receiver to get every message');
  assert.equal(failing.delivered(a), range(5), 'device a in order, each once');
  assert.equal(failing.delivered(b), range(5), 'device b in order, each once');
  assert.is(failing.requests.filter((r) => r.status === 500).length, 8);
  // Once delivered, the checkpoint moves past the last message.
  const last = await positionOf(t, b, 5);
  const lastA = await positionOf(t, a, 5);
  await eventually(async () => {
    const cp = await checkpointOf(t, channels[0]!);
    return cp && !before(cp, last) && !before(cp, lastA);
  }, 10_000, 'the checkpoint to move past the delivered messages');
  const logs = (await t.call('GET', `/api/logs?resourceId=${a}&type=error`)).body.logs as unknown[];
  assert.is(logs.length, 0, 'no delivery finally failed');

  await c.endAsync();
  for (const id of channels) await t.call('DELETE', `/api/channels/${id}`);
  await Promise.all([failing.close(), prompt.close()]);
});

hooks('given a channel whose receiver fails while more messages arrive than its queue holds, then it reads its backlog from the store and still gets every message in order', async ({ t, p, a }) => {
  const limit = HTTP_QUEUE.maxMessages;
  HTTP_QUEUE.maxMessages = 4;
  try {
    const failing = await receiver(2);
    const prompt = await receiver();
    const channels: string[] = [];
    for (const r of [failing, prompt]) {
      const ch = await t.call('POST', '/api/channels', { body: { iotnode: a, http: { url: r.url } } });
      assert.is(ch.status, 201, ch.text);
      channels.push(ch.body._id as string);
    }
    const c = await connectMqtt(t, p.username, p.password);
    for (let seq = 1; seq <= 30; seq++) await publish(c, `${ROOT}/a`, { seq });
    await eventually(async () => failing.delivered(a).length >= 30 && prompt.delivered(a).length >= 30, 15000, 'both receivers to get all 30 messages');
    assert.equal(failing.delivered(a), range(30));
    assert.equal(prompt.delivered(a), range(30));
    assert.ok(
      t.logs.some((l) => l.channelId === channels[0] && String(l.msg).includes('is behind')),
      'the failing channel went past its queue and read from the store',
    );
    await c.endAsync();
    for (const id of channels) await t.call('DELETE', `/api/channels/${id}`);
    await Promise.all([failing.close(), prompt.close()]);
  } finally {
    HTTP_QUEUE.maxMessages = limit;
  }
});

hooks.run();

const restart = suite('http channel deliveries across a restart');

restart('given a receiver that is down when the platform stops, when the platform starts again and the receiver is back, then every message is delivered in order', async () => {
  let down = true;
  const requests: { status: number; seq: number; key: string | undefined }[] = [];
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c) => (text += c));
    req.on('end', () => {
      res.statusCode = down ? 503 : 200;
      requests.push({ status: res.statusCode, seq: JSON.parse(text).diff.seq, key: req.headers['idempotency-key'] as string | undefined });
      res.end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  const first = await startTestPlatform();
  const databaseUrl = first.platform.deps.config.databaseUrl;
  let second: TestPlatform | null = null;
  try {
    const p = await givenProvider(first, 'restarts', [`${ROOT}/r`]);
    const c = await connectMqtt(first, p.username, p.password);
    await publish(c, `${ROOT}/r`, { on: true });
    const device = (await deviceOf(first, `${ROOT}/r`))._id;
    const channel = await first.call('POST', '/api/channels', { body: { iotnode: device, http: { url } } });
    assert.is(channel.status, 201, channel.text);
    for (let seq = 1; seq <= 3; seq++) await publish(c, `${ROOT}/r`, { seq });
    await c.endAsync();
    await eventually(async () => requests.length >= 2, 10_000, 'the first attempts');
    await first.stop();

    down = false;
    second = await startTestPlatform({ databaseUrl });
    await eventually(async () => requests.filter((r) => r.status === 200 && r.seq).length >= 3, 10000, 'the messages after the restart');
    assert.equal(requests.filter((r) => r.status === 200 && r.seq).map((r) => r.seq), [1, 2, 3]);
    // The message tried before the stop and delivered after it kept its idempotency key.
    const keysOfFirst = new Set(requests.filter((r) => r.seq === 1).map((r) => r.key));
    assert.is(keysOfFirst.size, 1, `one key for message 1 over ${requests.filter((r) => r.seq === 1).length} attempts`);
    assert.ok([...keysOfFirst][0], 'a key');
  } finally {
    await (second ?? first).stop().catch(() => undefined);
    await new Promise<void>((r) => server.close(() => r()));
  }
});

restart.run();
