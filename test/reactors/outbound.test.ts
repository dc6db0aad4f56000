import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MAX_ANSWER_BYTES, OutboundRefused, answerText, outboundFetch, reachable } from '../../reactors/outbound.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { receiver } from '../support/receiver.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish } from '../ingest/support.js';

const policy = suite('outbound targets');

policy('given each policy, then loopback, link-local and private addresses are reached only where it allows', () => {
  const cases: [string, boolean, boolean, boolean][] = [
    // address, public, private, any
    ['93.184.216.34', true, true, true],
    ['2606:2800:220:1:248:1893:25c8:1946', true, true, true],
    ['10.1.2.3', false, true, true],
    ['172.20.0.1', false, true, true],
    ['192.168.1.1', false, true, true],
    ['100.64.0.1', false, true, true],
    ['fd00::1', false, true, true],
    ['127.0.0.1', false, false, true],
    ['::1', false, false, true],
    ['::ffff:127.0.0.1', false, false, true],
    ['::ffff:10.0.0.1', false, true, true],
    ['169.254.169.254', false, false, true],
    ['fe80::1', false, false, true],
    ['0.0.0.0', false, false, true],
    ['224.0.0.1', false, false, true],
  ];
  for (const [address, pub, priv, any] of cases) {
    assert.is(reachable(address, 'public'), pub, `${address} under public`);
    assert.is(reachable(address, 'private'), priv, `${address} under private`);
    assert.is(reachable(address, 'any'), any, `${address} under any`);
  }
});

policy('given public, when a request names a loopback address or a name that resolves to one, then it is refused before any connection; with any it arrives', async () => {
  const r = await receiver();
  try {
    const post = (f: ReturnType<typeof outboundFetch>, url: string) => f(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    const refusal = async (url: string) => {
      try {
        await post(outboundFetch('public'), url);
      } catch (err) {
        return (err as { cause?: unknown }).cause;
      }
      return assert.unreachable(`${url} was reached`);
    };
    const literal = await refusal(r.url);
    assert.instance(literal, OutboundRefused);
    assert.match((literal as Error).message, /^127\.0\.0\.1 is 127\.0\.0\.1, which is not a public address \(OUTBOUND_TARGETS=public\)$/);
    const named = await refusal(r.url.replace('127.0.0.1', 'localhost'));
    assert.instance(named, OutboundRefused);
    assert.match((named as Error).message, /^localhost is /);
    assert.is(r.received.length, 0, 'nothing arrived');
    assert.is((await post(outboundFetch('any'), r.url)).status, 200);
    assert.is(r.received.length, 1);
  } finally {
    await r.close();
  }
});

policy('given a server that answers an endless body, when its answer is read, then 64 KiB of it are kept and the connection is let go', async () => {
  let closed = false;
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const pump = () => {
      while (!closed && res.write(chunk));
      if (!closed) res.once('drain', pump);
    };
    res.on('close', () => (closed = true));
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  try {
    const res = await outboundFetch('any')(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`, { method: 'GET' });
    const text = await answerText(res);
    assert.is(text.length, MAX_ANSWER_BYTES);
    await eventually(async () => closed, 5_000, 'the server to see the connection end');
  } finally {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  }
});

policy.run();

const ROOT = 'svc/generic/v2/outbound';
const channels = suite<{ t: TestPlatform }>('http channels under OUTBOUND_TARGETS=public');

channels.before(async (ctx) => {
  ctx.t = await startTestPlatform({ outboundTargets: 'public' });
});
channels.after(async (ctx) => {
  await ctx.t.stop();
});

channels('given an http channel to a loopback receiver, when its device reports, then nothing is sent and the refusal is logged on the device at once, without retries', async ({ t }) => {
  const r = await receiver();
  try {
    const p = await givenProvider(t, 'outbound', [ROOT]);
    const c = await connectMqtt(t, p.username, p.password);
    await publish(c, ROOT, { on: true });
    const device = (await deviceOf(t, ROOT))._id as string;
    const channel = await t.call('POST', '/api/channels', { body: { iotnode: device, http: { url: r.url } } });
    assert.is(channel.status, 201, channel.text);
    const started = Date.now();
    await publish(c, ROOT, { on: false });
    const entry = await eventually(async () => {
      const logs = (await t.call('GET', `/api/logs?resourceId=${device}&type=error`)).body.logs as { message: string }[];
      return logs.find((l) => l.message.includes(channel.body._id));
    }, 10_000, 'the refusal in the device log');
    assert.match(entry.message, /delivery to http:\/\/127\.0\.0\.1:\d+ failed \(fetch failed: 127\.0\.0\.1 is 127\.0\.0\.1, which is not a public address \(OUTBOUND_TARGETS=public\)\)/);
    assert.ok(Date.now() - started < 2_000, 'a refused address is final: no back-off');
    assert.is(r.received.length, 0);
    await c.endAsync();
  } finally {
    await r.close();
  }
});

channels.run();
