import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect, type Socket } from 'node:net';
import mqtt from 'mqtt';
import mqttPacket from 'mqtt-packet';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { RawPublisher } from '../support/rawMqtt.js';
import { deviceOf, eventually, givenProvider, type Provider } from './support.js';
import { logsOf } from '../translators/given.js';

/**
 * A consumer that stops reading (a frozen process, a dead link the kernel has
 * not noticed yet) must not hold up what every other consumer receives: the
 * broker hands a message to the next one only once each subscriber has taken
 * it, so a subscriber whose connection never drains would stall them all.
 */
const TOPIC = 'svc/generic/v2/slow/dev';
const MESSAGES = 12_000;
/** About 2.5 KB per output message: 12,000 of them are far more than the kernel's socket buffers on loopback hold. */
const PAD = 'x'.repeat(1200);

const slow = suite<{ t: TestPlatform; p: Provider }>('A consumer that stops reading');

slow.before(async (ctx) => {
  ctx.t = await startTestPlatform({ mqttDrainTimeoutSeconds: 2 });
  ctx.p = await givenProvider(ctx.t, 'slow', [TOPIC]);
  const device = await mqtt.connectAsync(`mqtt://127.0.0.1:${ctx.t.mqttPort}`, { username: ctx.p.username, password: ctx.p.password, clientId: 'dev', reconnectPeriod: 0, protocolVersion: 4 });
  await device.publishAsync(TOPIC, JSON.stringify({ n: 0 }), { qos: 1 });
  await device.endAsync();
  const id = (await deviceOf(ctx.t, TOPIC))._id;
  assert.is((await ctx.t.call('POST', '/api/channels', { body: { iotnode: id, mqtt: { type: 'basicCredentialsSet', recipient: ctx.p.setId } } })).status, 201);
});
slow.after(async ({ t }) => t.stop());

/** A consumer that subscribes, then never reads again: its socket stays open and says nothing. */
async function frozenConsumer(t: TestPlatform, p: Provider): Promise<{ socket: Socket; closed: Promise<void> }> {
  const socket = connect(t.mqttPort, '127.0.0.1');
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  const parser = mqttPacket.parser({ protocolVersion: 4 });
  const subscribed = new Promise<void>((resolve) => parser.on('packet', (packet) => packet.cmd === 'suback' && resolve()));
  socket.on('data', (d) => parser.parse(d));
  socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: 'frozen', keepalive: 0, username: p.username, password: Buffer.from(p.password) }));
  socket.write(mqttPacket.generate({ cmd: 'subscribe', messageId: 1, subscriptions: [{ topic: `svc/output/v2/${p.setId}/#`, qos: 1 }] }));
  await subscribed;
  socket.removeAllListeners('data');
  socket.pause();
  return { socket, closed };
}

slow('given a consumer that stopped reading, when thousands of messages go out, then another consumer gets every one without waiting for it, and the frozen one is cut off', async ({ t, p }) => {
  const frozen = await frozenConsumer(t, p);
  let got = 0;
  const live = await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { username: p.username, password: p.password, clientId: 'live', reconnectPeriod: 0, protocolVersion: 4 });
  live.on('message', (_topic, payload) => {
    if (typeof JSON.parse(String(payload)).diff?.n === 'number') got++;
  });
  await live.subscribeAsync(`svc/output/v2/${p.setId}/#`, { qos: 1 });

  const publisher = new RawPublisher(t.mqttPort);
  await publisher.connect(p.username, p.password);
  for (let n = 1; n <= MESSAGES; n++) publisher.publish((n % 65_000) + 1, TOPIC, JSON.stringify({ n, pad: PAD }), false);
  await eventually(async () => publisher.acks >= MESSAGES, 60_000, 'every message stored');
  publisher.close();

  // Within far less than aedes's own drain time-out of 60 s, in which it waits for a connection to drain.
  await eventually(async () => got >= MESSAGES, 20_000, `the live consumer to get all ${MESSAGES} messages`);
  // The frozen one is cut off once it has left its output unread for the drain time-out (2 s here), and told.
  const cut = await eventually(async () => t.logs.find((l) => /^MQTT consumer cut off: \d+ bytes waited \d+ s for the client to read them$/.test(String(l.msg))), 10_000, 'the frozen consumer cut off');
  assert.is(cut.clientId, `${p.setId}/frozen`);
  assert.ok(Number(cut.unsent) > 1_000_000, `unsent bytes: ${cut.unsent}`);
  await eventually(async () => (await logsOf(t, p.setId)).some((l) => /^MQTT connection of client frozen closed: \d+ bytes waited \d+ s for the client to read them$/.test(l.message)), 5_000, 'the entry in the set\'s log');
  assert.ok(live.connected, 'the live consumer stays');
  await live.endAsync();
  frozen.socket.destroy();
  await frozen.closed;
});

slow.run();
