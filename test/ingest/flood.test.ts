import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { connect } from 'node:net';
import mqttPacket from 'mqtt-packet';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, deviceOf, givenProvider, publish } from './support.js';

const flood = suite<{ t: TestPlatform }>('MQTT broker under a flood of connections');

flood.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
flood.after(async (ctx) => {
  await ctx.t.stop();
});

/** Opens a TCP connection, sends CONNECT, and resolves with the CONNACK return code, or 'closed' when the broker drops it. */
function attempt(port: number, i: number): Promise<number | 'closed'> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    parser.on('packet', (p) => {
      if (p.cmd === 'connack') {
        resolve(p.returnCode ?? 0);
        socket.destroy();
      }
    });
    socket.on('data', (d) => parser.parse(d));
    socket.on('close', () => resolve('closed'));
    socket.on('error', () => resolve('closed'));
    socket.write(mqttPacket.generate({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, clientId: `flood-${i}`, keepalive: 30, username: 'nobody', password: Buffer.from('x') }));
  });
}

flood('when hundreds of connections arrive at once, then the excess is refused and logged, and the broker keeps serving', async ({ t }) => {
  const provider = await givenProvider(t, 'steady', ['svc/generic/v2/flood/device']);
  const started = Date.now();
  const results = await Promise.all(Array.from({ length: 400 }, (_, i) => attempt(t.mqttPort, i)));
  const seconds = (Date.now() - started) / 1000;
  const refusedEarly = results.filter((r) => r === 'closed').length;
  const badLogin = results.filter((r) => r === 4).length;
  // The bucket (200, refilled at 100/s) admits at most this many over the time the flood took to arrive; on a
  // loaded machine the flood spreads out, so the bound comes from the time measured, not from a fixed share.
  const admitted = results.length - refusedEarly;
  assert.ok(admitted <= 200 + Math.ceil(100 * seconds), `admitted ${admitted} of ${results.length} within ${seconds.toFixed(2)} s`);
  assert.ok(refusedEarly > 0, `refused before login: ${refusedEarly} (the flood took ${seconds.toFixed(2)} s)`);
  assert.ok(badLogin > 0, 'the first ones reached the login check');
  assert.ok(t.logs.some((l) => l.msg === 'MQTT connections refused: too many new connections'));
  // The bucket refills; a legitimate provider connects and its data is stored.
  await new Promise((r) => setTimeout(r, 2500));
  const c = await connectMqtt(t, provider.username, provider.password);
  await publish(c, 'svc/generic/v2/flood/device', { alive: true });
  assert.is((await deviceOf(t, 'svc/generic/v2/flood/device')).alive, true);
  await c.endAsync();
});

flood.run();
