import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { deviceWhen, givenTranslator } from '../translators/given.js';
import { deviceCodecs, draginoLht65, reviewedTranslator } from '../translators/codecs/index.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';

/**
 * Real device codecs behind a network server: every uplink of the five
 * vendors' codecs, posted by ChirpStack's HTTP integration, decodes to the
 * same canonical fields as over MQTT; a command's object is encoded into the
 * downlink's bytes by the device's codec (`encodeDownlink`).
 */
const TOKEN = 'codec-token';
const euiOf = (i: number) => `a84041000018${String(i).padStart(4, '0')}`;

const codecs = suite<{ t: TestPlatform; ns: ChirpStackStandIn; connector: string; devices: Map<string, string> }>('Device codecs through a network server');

codecs.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set(deviceCodecs.map((_, i) => euiOf(i)))).start();
  const connector = await ctx.t.call('POST', '/api/connectors', { body: { name: 'codecs', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: TOKEN } } });
  ctx.connector = connector.body._id;
  ctx.ns.integration = { url: `${ctx.t.baseUrl}/api/integrations/chirpstack/${connector.body._id}`, headers: { Authorization: `Bearer ${connector.body.webhookSecret}` } };
  ctx.devices = new Map();
  for (const [i, codec] of deviceCodecs.entries()) {
    await givenTranslator(ctx.t, reviewedTranslator(codec));
    const device = await ctx.t.call('POST', '/api/iotnodes', {
      body: { name: `${codec.vendor} ${codec.model}`, connector: ctx.connector, devEui: euiOf(i), translatorPreferences: [{ name: codec.name, version: '1.0.0', upgradePolicy: 'none' }] },
    });
    assert.is(device.status, 201, device.text);
    ctx.devices.set(codec.name, device.body._id);
  }
});
codecs.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.ns.stop();
});

codecs('when ChirpStack posts each codec\'s uplinks, then each decodes to its canonical fields', async ({ t, ns, devices }) => {
  for (const [i, codec] of deviceCodecs.entries()) {
    for (const uplink of codec.uplinks) {
      const res = await ns.uplink(euiOf(i), uplink.fPort, Buffer.from(uplink.hex, 'hex'));
      assert.is(res.status, 200, `${codec.name}: ${res.text}`);
      const device = await deviceWhen(t, devices.get(codec.name)!, (d) => d.encodedData?.hexEncoded === uplink.hex, `${codec.name}: ${uplink.description}`);
      for (const [field, value] of Object.entries(uplink.canonical)) assert.equal(device[field], value, `${codec.name} (${uplink.description}): ${field}`);
    }
  }
});

codecs('when a command carries an object, then the device\'s codec encodes it and the network server gets its bytes', async ({ t, ns, devices }) => {
  const i = deviceCodecs.indexOf(draginoLht65);
  const [downlink] = draginoLht65.downlinks!;
  ns.requests.length = 0;
  const res = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'loraAppServerQueueDownlink', iotnodeId: devices.get(draginoLht65.name)!, data: { fPort: String(downlink!.port), object: downlink!.data } } });
  assert.is(res.status, 202, res.text);
  const post = ns.requests.find((r) => r.method === 'POST')!;
  assert.equal(post.body, { queueItem: { devEui: euiOf(i), confirmed: false, fPort: downlink!.port, data: Buffer.from(downlink!.hexEncoded, 'hex').toString('base64') } });
  const [item] = (await t.call('GET', `/api/iotnodes/${devices.get(draginoLht65.name)}/downlinks`)).body;
  assert.is(item.data, downlink!.hexEncoded);
});

codecs('when a command carries an object and asks for a port its codec does not use, then the downlink goes out on the codec\'s port', async ({ t, ns, devices }) => {
  const i = deviceCodecs.indexOf(draginoLht65);
  const [downlink] = draginoLht65.downlinks!;
  ns.requests.length = 0;
  const res = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'loraAppServerQueueDownlink', iotnodeId: devices.get(draginoLht65.name)!, data: { fPort: '9', object: downlink!.data } } });
  assert.is(res.status, 202, res.text);
  assert.is(downlink!.port, 2, 'the codec encodes this downlink for port 2');
  const post = ns.requests.find((r) => r.method === 'POST')!;
  assert.equal(post.body, { queueItem: { devEui: euiOf(i), confirmed: false, fPort: 2, data: Buffer.from(downlink!.hexEncoded, 'hex').toString('base64') } });
  const item = ((await t.call('GET', `/api/iotnodes/${devices.get(draginoLht65.name)}/downlinks`)).body as Record<string, unknown>[]).find((d) => d.commandId === res.body.commandId)!;
  assert.is(item.fPort, 2);
});

codecs('when a command with an object asks for a port outside 1 to 223, then 422 names the port and nothing is sent', async ({ t, ns, devices }) => {
  const before = ns.requests.length;
  const device = devices.get(draginoLht65.name)!;
  const zero = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'loraAppServerQueueDownlink', iotnodeId: device, data: { fPort: '0', object: { interval: 60 } } } });
  assert.is(zero.status, 422, zero.text);
  assert.is(zero.text, 'ERR - data.fPort must be a LoRaWAN application port, 1 to 223 (a number or a string of digits)');
  const call = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'apiCall', iotnodeId: device, data: { callName: 'sendDownlink', callData: { payload: { fPort: 300, object: { interval: 60 } } } } } });
  assert.is(call.status, 422, call.text);
  assert.match(call.text, /^ERR - data\.callData\.payload\.fPort must be a LoRaWAN application port/);
  assert.is(ns.requests.length, before, 'nothing reached the network server');
});

codecs('when the codec refuses the object, or the device has no encoder, then 422 naming the object and nothing is stored', async ({ t, ns, devices }) => {
  const before = ns.requests.length;
  const refused = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'loraAppServerQueueDownlink', iotnodeId: devices.get(draginoLht65.name)!, data: { fPort: 2, object: { interval: -5 } } } });
  assert.is(refused.status, 422, refused.text);
  assert.match(refused.text, /^ERR - data\.object was refused by .*interval must be 1 to 16777215 seconds/);
  const bare = await t.call('POST', '/api/iotnodes', { body: { name: 'no translator', connector: (await t.call('GET', `/api/iotnodes/${devices.get(draginoLht65.name)}`)).body.connector, devEui: 'a840410000180099' } });
  const none = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'apiCall', iotnodeId: bare.body._id, data: { callName: 'sendDownlink', callData: { payload: { fPort: 2, object: { interval: 60 } } } } } });
  assert.is(none.status, 422, none.text);
  assert.match(none.text, /^ERR - data\.callData\.payload\.object needs a translator/);
  assert.is(ns.requests.length, before, 'nothing reached the network server');
  assert.equal((await t.call('GET', `/api/iotnodes/${bare.body._id}/downlinks`)).body, []);
});

codecs.run();
