import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish, type Provider } from './support.js';

const TOPIC = 'svc/generic/v2/outburst/meter';
const MESSAGES = 2000;

/** Write system calls this process has made (`syscw` of /proc/self/io): the platform runs in this process. */
const writesSoFar = () => Number(/syscw: (\d+)/.exec(readFileSync('/proc/self/io', 'utf8'))![1]);

const burst = suite<{ t: TestPlatform; p: Provider }>('Output topics under a burst of reports');

burst.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  const p = (ctx.p = await givenProvider(t, 'outburst', [TOPIC]));
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, TOPIC, { n: 0 });
  await c.endAsync();
  const device = await deviceOf(t, TOPIC);
  const channel = await t.call('POST', '/api/channels', { body: { iotnode: device._id, mqtt: { type: 'basicCredentialsSet', recipient: p.setId } } });
  assert.is(channel.status, 201, channel.text);
});
burst.after(async (ctx) => {
  await ctx.t.stop();
});

burst('when a burst of reports is stored in a few batches, then a consumer gets every one, and the broker writes them a batch at a time', async ({ t, p }) => {
  // A QoS 0 subscription, so the consumer (in this process) writes no acknowledgements of its own.
  const consumer = await connectMqtt(t, p.username, p.password);
  const seqs = new Set<number>();
  consumer.on('message', (_topic, payload) => {
    const seq = (JSON.parse(payload.toString()) as { diff: { seq?: number } }).diff.seq;
    if (seq !== undefined) seqs.add(seq);
  });
  await consumer.subscribeAsync(`svc/output/v2/${p.setId}/#`, { qos: 0 });

  // The publisher is another process (MQTT.js, every message in flight at once), so this process's writes are the platform's alone.
  const before = writesSoFar();
  const script = `import mqtt from 'mqtt';
    const c = await mqtt.connectAsync(process.env.URL, { username: process.env.U, password: process.env.P, reconnectPeriod: 0 });
    await Promise.all(Array.from({ length: ${MESSAGES} }, (_, n) => c.publishAsync(process.env.TOPIC, JSON.stringify({ seq: n }), { qos: 1 })));
    await c.endAsync();`;
  const pub = spawn(process.execPath, ['--input-type=module', '-e', script], {
    env: { ...process.env, URL: `mqtt://127.0.0.1:${t.mqttPort}`, U: p.username, P: p.password, TOPIC },
  });
  let errors = '';
  pub.stderr.on('data', (d) => (errors += d));
  assert.is(await new Promise<number>((r) => pub.on('close', (code) => r(code ?? -1))), 0, `the publisher: ${errors}`);
  await eventually(async () => seqs.size === MESSAGES, 30_000, `all ${MESSAGES} output messages (got ${seqs.size})`);
  const writes = writesSoFar() - before;

  // The output reactor hands the broker each batch of changes while the consumer's connection is
  // corked; every message of it must go in that write, not trickle out afterwards in one write each.
  // The count takes in all the platform's writes (its queries, the PUBACKs), which grow with the number
  // of batches, so with the load of the machine: 110 to 150 on an idle one, 524 in a busy CI run, and
  // about 1,830 when the broker holds back deliveries past aedes's default of 100 in flight.
  console.log(`    ${MESSAGES} reports in, ${MESSAGES} output messages out: ${writes} write calls of the platform`);
  assert.ok(writes < MESSAGES / 2, `${writes} write calls for ${MESSAGES} messages`);
  await consumer.endAsync();
});

burst.run();
