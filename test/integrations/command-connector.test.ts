import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';
import { givenUser } from '../users/given.js';

const EUI = '70b3d57ed0052b21';
const TOKEN = 'chirpstack-api-token';

interface Ctx {
  t: TestPlatform;
  ns: ChirpStackStandIn;
  chirpstack: Record<string, any>;
}

/**
 * The spec's device command: `integrationName` is optional when the device has a connector, and wins over it when
 * given; the generic call addresses the device by `callData.devEui`.
 */
const cc = suite<Ctx>('Device commands: the connector and the address a command goes to');

cc.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  const res = await ctx.t.call('POST', '/api/connectors', { body: { name: 'plant network', integration: 'ChirpStack', chirpstack: { url: ctx.ns.url, apiToken: TOKEN } } });
  assert.is(res.status, 201, res.text);
  ctx.chirpstack = res.body;
});
cc.after(async (ctx) => {
  await ctx.t.stop();
  await ctx.ns.stop();
});

const queue = (integrationName: string | undefined, iotnodeId: string, extra: Record<string, unknown> = {}) => ({
  command: 'loraAppServerQueueDownlink',
  iotnodeId,
  ...(integrationName ? { integrationName } : {}),
  data: { confirmed: false, reference: 'note', fPort: '2', data: '0102' },
  ...extra,
});

cc('given an iotnode without a connector and one ChirpStack connector the caller may use, when a downlink is queued with integrationName ChirpStack, then it goes out through that connector', async ({ t, ns, chirpstack }) => {
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'no connector', devEui: EUI } });
  assert.is(device.status, 201, device.text);
  ns.requests.length = 0;
  const res = await t.call('PUT', '/api/iotnodes/command', { body: queue('ChirpStack', device.body._id) });
  assert.is(res.status, 202, res.text);
  assert.is(res.body.status, 'queued');
  assert.is(ns.requests.find((r) => r.method === 'POST')?.path, `/api/devices/${EUI}/queue`);
  const command = await t.call('GET', `/api/commands/${res.body.commandId}`);
  assert.is(command.body.connectorId, chirpstack._id);
  assert.is(command.body.integration, 'ChirpStack');
});

cc('given an iotnode bound to a Loriot connector, when a downlink is queued with integrationName ChirpStack, then integrationName wins and ChirpStack takes it', async ({ t, ns, chirpstack }) => {
  const loriot = await t.call('POST', '/api/connectors', { body: { name: 'city network', integration: 'Loriot', loriot: { url: 'http://127.0.0.1:9', applicationId: 'be7a0123', token: 't' } } });
  assert.is(loriot.status, 201, loriot.text);
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'on loriot', devEui: EUI, connector: loriot.body._id } });
  assert.is(device.status, 201, device.text);
  ns.requests.length = 0;
  const res = await t.call('PUT', '/api/iotnodes/command', { body: queue('ChirpStack', device.body._id) });
  assert.is(res.status, 202, res.text);
  assert.is(ns.requests.filter((r) => r.method === 'POST').length, 1);
  assert.is((await t.call('GET', `/api/commands/${res.body.commandId}`)).body.connectorId, chirpstack._id);
});

cc('given a caller who may use no ChirpStack connector, then several, when integrationName ChirpStack is sent, then 422 naming the problem, and connectorId picks one', async ({ t, ns }) => {
  const installer = await givenUser(t, 'installer-cc', { attributes: { roles: ['installer'] } });
  const device = await t.call('POST', '/api/iotnodes', { token: installer.token, body: { name: 'installer node', devEui: EUI } });
  assert.is(device.status, 201, device.text);
  const none = await t.call('PUT', '/api/iotnodes/command', { token: installer.token, body: queue('ChirpStack', device.body._id) });
  assert.is(none.status, 422, none.text);
  assert.match(none.text, /^ERR - integrationName ChirpStack: the iotnode has no connector and you may use no ChirpStack connector; create one, or set the iotnode's connector to one/);
  const connector = async (name: string) => {
    const res = await t.call('POST', '/api/connectors', { token: installer.token, body: { name, integration: 'ChirpStack', chirpstack: { url: ns.url, apiToken: TOKEN } } });
    assert.is(res.status, 201, res.text);
    return res.body._id as string;
  };
  const first = await connector('first');
  const second = await connector('second');
  const several = await t.call('PUT', '/api/iotnodes/command', { token: installer.token, body: queue('ChirpStack', device.body._id) });
  assert.is(several.status, 422, several.text);
  assert.match(several.text, /you may use several ChirpStack connectors \(/);
  assert.ok(several.text.includes(first) && several.text.includes(second), several.text);
  assert.match(several.text, /name one with connectorId/);
  const named = await t.call('PUT', '/api/iotnodes/command', { token: installer.token, body: queue('ChirpStack', device.body._id, { connectorId: second }) });
  assert.is(named.status, 202, named.text);
  assert.is((await t.call('GET', `/api/commands/${named.body.commandId}`, { token: installer.token })).body.connectorId, second);
});

cc('when connectorId names a connector the caller cannot use, or one of another integration, then 422', async ({ t, chirpstack }) => {
  const installer = await givenUser(t, 'installer-cc2', { attributes: { roles: ['installer'] } });
  const device = await t.call('POST', '/api/iotnodes', { token: installer.token, body: { name: 'installer node 2', devEui: EUI } });
  const foreign = await t.call('PUT', '/api/iotnodes/command', { token: installer.token, body: queue('ChirpStack', device.body._id, { connectorId: chirpstack._id }) });
  assert.is(foreign.status, 422, foreign.text);
  assert.match(foreign.text, /^ERR - connectorId does not reference a connector you may use/);
  const mine = await t.call('POST', '/api/iotnodes', { body: { name: 'admin node', devEui: EUI } });
  const other = await t.call('PUT', '/api/iotnodes/command', { body: queue('TheThingsStack', mine.body._id, { connectorId: chirpstack._id }) });
  assert.is(other.status, 422, other.text);
  assert.match(other.text, /^ERR - connectorId names a ChirpStack connector, not a TheThingsStack one/);
});

cc('given an iotnode on the ChirpStack connector without a devEui, when a generic apiCall names callData.devEui, then the call addresses that DevEUI', async ({ t, ns, chirpstack }) => {
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'no devEui', connector: chirpstack._id } });
  assert.is(device.status, 201, device.text);
  ns.requests.length = 0;
  const sent = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'apiCall', iotnodeId: device.body._id, data: { callName: 'sendDownlink', callData: { devEui: EUI.toUpperCase(), payload: { fPort: '2', payloadHex: '0a0b' } } } } });
  assert.is(sent.status, 202, sent.text);
  assert.is(ns.requests.find((r) => r.method === 'POST')?.path, `/api/devices/${EUI}/queue`);
  const read = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'apiCall', iotnodeId: device.body._id, data: { callName: 'getDownlinks', callData: { devEui: EUI } } } });
  assert.is(read.status, 200, read.text);
  const bare = await t.call('PUT', '/api/iotnodes/command', { body: { command: 'apiCall', iotnodeId: device.body._id, data: { callName: 'getDownlinks', callData: {} } } });
  assert.is(bare.status, 422, bare.text);
  assert.match(bare.text, /^ERR - iotnodeId names an iotnode without a devEui; set its devEui \(16 hexadecimal digits\) or give data\.callData\.devEui/);
});

cc.run();
