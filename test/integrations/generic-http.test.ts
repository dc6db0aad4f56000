import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually, projected } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';

const EUI = '0004a30b001c0530';

interface Ctx {
  t: TestPlatform;
  connector: Record<string, any>;
  other: Record<string, any>;
  byEui: Record<string, any>;
  bySecret: Record<string, any>;
  foreign: Record<string, any>;
}

const http = suite<Ctx>('GenericHttp: device reports and raw uplinks POSTed by any system');

const post = (t: TestPlatform, connectorId: string, secret: string | null, body: unknown) =>
  fetch(`${t.baseUrl}/api/integrations/http/${connectorId}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret ? { authorization: `Bearer ${secret}` } : {}) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  }).then(async (res) => ({ status: res.status, text: await res.text() }));

const send = (ctx: Ctx, body: unknown) => post(ctx.t, ctx.connector._id, ctx.connector.webhookSecret, body);

http.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  await givenTranslator(ctx.t);
  const created = await ctx.t.call('POST', '/api/connectors', { body: { name: 'building gateway', integration: 'GenericHttp' } });
  assert.is(created.status, 201, created.text);
  ctx.connector = created.body;
  const other = await ctx.t.call('POST', '/api/connectors', { body: { name: 'another site', integration: 'GenericHttp' } });
  assert.is(other.status, 201, other.text);
  ctx.other = other.body;
  const device = (fields: Record<string, unknown>) => ctx.t.call('POST', '/api/iotnodes', { body: fields }).then((r) => (assert.is(r.status, 201, r.text), r.body));
  const translator = [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }];
  ctx.byEui = await device({ name: 'climate by EUI', connector: ctx.connector._id, devEui: EUI.toUpperCase(), translatorPreferences: translator });
  ctx.bySecret = await device({ name: 'hall sensor', connector: ctx.connector._id, secret: 'hall/sensor-7', translatorPreferences: translator });
  ctx.foreign = await device({ name: 'another site\'s sensor', connector: ctx.other._id, secret: 'site-b/sensor-1' });
});
http.after(async (ctx) => ctx.t.stop());

http('when a GenericHttp connector is created, then it gets a webhook secret once, and its integration lists its webhook', async ({ t, connector }) => {
  assert.type(connector.webhookSecret, 'string');
  const read = await t.call('GET', `/api/connectors/${connector._id}`);
  assert.not.ok(read.text.includes(connector.webhookSecret));
  const listed = (await t.call('GET', '/api/integrations')).body.find((i: { name: string }) => i.name === 'GenericHttp');
  assert.equal([listed.webhook, listed.available, listed.commands], ['/api/integrations/http/{connectorId}', true, []]);
});

http('when a raw uplink names a device by devEui, then its translator decodes it into fields and history', async (ctx) => {
  const { t, byEui } = ctx;
  const res = await send(ctx, { devEui: EUI, encodedData: { hexEncoded: climateHex(23.5, 45, 3050), port: 1 } });
  assert.is(res.status, 200, res.text);
  assert.equal(JSON.parse(res.text), { stored: 1 });
  const after = await deviceWhen(t, byEui._id, (d) => d.temperature === 23.5, 'the decoded uplink');
  assert.is(after.relativeHumidity, 45);
  assert.equal(after.encodedData, { hexEncoded: climateHex(23.5, 45, 3050), port: 1 });
  const stats = await t.call('GET', `/api/iotnodes/${byEui._id}/stats?measurement=temperature&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), [23.5]);
});

http('when a JSON report names a device by secret, then its fields are stored; with a raw frame as well, then both', async (ctx) => {
  const { t, bySecret } = ctx;
  const report = await send(ctx, { secret: 'hall/sensor-7', occupancy: true, people: 3, zone: { name: 'hall' } });
  assert.is(report.status, 200, report.text);
  const first = await deviceWhen(t, bySecret._id, (d) => d.people === 3, 'the JSON report');
  assert.equal([first.occupancy, first.zone], [true, { name: 'hall' }]);
  const both = await send(ctx, { secret: 'hall/sensor-7', people: 4, encodedData: { hexEncoded: climateHex(19, 50, 3100), port: 1 } });
  assert.is(both.status, 200, both.text);
  const after = await deviceWhen(t, bySecret._id, (d) => d.people === 4 && d.temperature === 19, 'the report with a frame');
  assert.is(after.relativeHumidity, 50);
  assert.is(after.name, 'hall sensor');
});

http('when a report names the secret of another connector\'s device, or an unknown devEui, then nothing is stored and the connector log says so', async (ctx) => {
  const { t, connector, foreign } = ctx;
  const before = (await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count');
  const stolen = await send(ctx, { secret: 'site-b/sensor-1', temperature: -99 });
  assert.is(stolen.status, 200, stolen.text);
  assert.equal(JSON.parse(stolen.text), { stored: 0 });
  const unknown = await send(ctx, { devEui: '0004a30b001c05ff', temperature: 1 });
  assert.equal(JSON.parse(unknown.text), { stored: 0 });
  await eventually(async () => {
    const messages = (await logsOf(t, connector._id)).map((l) => l.message);
    return messages.some((m) => m.startsWith('Uplink for secret site-b/sensor-1 ignored: no iotnode of this connector has it')) && messages.some((m) => m.startsWith('Uplink for devEui 0004a30b001c05ff ignored'));
  }, 10_000, 'the connector log');
  await projected(t);
  assert.is((await t.call('GET', `/api/iotnodes/${foreign._id}`)).body.temperature, undefined, 'the other connector\'s device is untouched');
  assert.is((await t.call('GET', '/api/iotnodes?options=count')).headers.get('x-total-count'), before, 'no device created');
  assert.is((await logsOf(t, foreign._id)).length, 0);
});

http('when a body is malformed, then 422 naming the field, and nothing is stored', async (ctx) => {
  const { t, byEui } = ctx;
  const frame = { hexEncoded: '0102', port: 1 };
  const cases: [unknown, RegExp][] = [
    [[{ devEui: EUI }], /^ERR - body must be (a JSON )?object/],
    [{ temperature: 1 }, /^ERR - devEui or secret must name the iotnode, exactly one of the two$/],
    [{ devEui: EUI, secret: 'hall/sensor-7' }, /^ERR - devEui or secret must name the iotnode/],
    [{ devEui: 'xyz', encodedData: frame }, /^ERR - devEui must be 16 hexadecimal digits$/],
    [{ devEui: 1234, encodedData: frame }, /^ERR - devEui must be 16 hexadecimal digits$/],
    [{ secret: '' }, /^ERR - secret must be a string of 1 to 1024 characters$/],
    [{ secret: 'x'.repeat(1025) }, /^ERR - secret must be a string/],
    [{ devEui: EUI, encodedData: { hexEncoded: 'abc', port: 1 } }, /^ERR - encodedData\.hexEncoded must be hexadecimal, two digits per byte$/],
    [{ devEui: EUI, encodedData: { hexEncoded: 'zz', port: 1 } }, /^ERR - encodedData\.hexEncoded must be hexadecimal/],
    [{ devEui: EUI, encodedData: { hexEncoded: 'ab'.repeat(65_537), port: 1 } }, /^ERR - encodedData\.hexEncoded is 65537 bytes/],
    [{ devEui: EUI, encodedData: { hexEncoded: '01', port: -1 } }, /^ERR - encodedData\.port must be an integer from 0 to 65535$/],
    [{ devEui: EUI, encodedData: { hexEncoded: '01', port: 70_000 } }, /^ERR - encodedData\.port must be an integer/],
    [{ devEui: EUI, encodedData: { hexEncoded: '01', port: 1.5 } }, /^ERR - encodedData\.port must be an integer/],
    [{ devEui: EUI, encodedData: { hexEncoded: '01', port: '1' } }, /^ERR - encodedData\.port must be an integer/],
    [{ devEui: EUI, encodedData: { hexEncoded: '01' } }, /^ERR - encodedData\.port must be an integer/],
    [{ devEui: EUI, encodedData: '0102' }, /^ERR - encodedData must be an object/],
    [{ devEui: EUI, encodedData: { ...frame, fPort: 2 } }, /^ERR - encodedData\.fPort is not a field of encodedData/],
  ];
  for (const [body, message] of cases) {
    const res = await send(ctx, body);
    assert.is(res.status, 422, `${JSON.stringify(body).slice(0, 80)}: ${res.text}`);
    assert.match(res.text, message);
  }
  const notJson = await send(ctx, '{"devEui": ');
  assert.is(notJson.status, 422, notJson.text);
  assert.is(notJson.text, 'ERR - body is not valid JSON');
  const nul = await send(ctx, { devEui: EUI, note: 'a\u0000b' });
  assert.is(nul.status, 422, nul.text);
  await projected(t);
  const stats = await t.call('GET', `/api/iotnodes/${byEui._id}/stats?measurement=temperature&start=0`);
  assert.equal(stats.body.map((p: { value: number }) => p.value), [23.5], 'nothing stored by the refused calls');
});

http('when a call has no webhook secret, a wrong one, or another connector\'s, then 401 and the refusal is logged on the connector', async (ctx) => {
  const { t, connector, other } = ctx;
  const body = { devEui: EUI, temperature: 5 };
  assert.is((await post(t, connector._id, null, body)).status, 401);
  assert.is((await post(t, connector._id, 'not-the-secret', body)).status, 401);
  assert.is((await post(t, connector._id, other.webhookSecret, body)).status, 401);
  assert.is((await post(t, 'ffffffffffffffffffffffff', connector.webhookSecret, body)).status, 401);
  // Wait for the entry asserted below as well as for the count: the log is written apart from the 401.
  const logs = await eventually(async () => {
    const all = await logsOf(t, connector._id);
    return all.filter((l) => l.message.startsWith('Webhook call refused')).length >= 3 && all.some((l) => /wrong bearer secret/.test(l.message)) ? all : null;
  }, 10_000, 'the refusals');
  assert.ok(logs.some((l) => l.category === 'access' && /wrong bearer secret/.test(l.message)));
});

http.run();
