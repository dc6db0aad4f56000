import { suite } from 'uvu';
import { eventually } from '../ingest/support.js';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, deviceOf, givenProvider, publish, type Provider } from '../ingest/support.js';
import { rebuild } from '../../projections/rebuild.js';
import { deviceWhen, givenTranslator, logsAtLeast, logsOf, settle, uplink } from './given.js';
import { decentlabDlPr26, deviceCodecs, draginoLht65, elsysErsCo2, examplesOf, reviewedTranslator, type DeviceCodec } from './codecs/index.js';

/**
 * Five real device codecs of different vendors, brought onto the platform as
 * a user would: imported from their device-repository files, reviewed,
 * uploaded with their examples, and attached to devices whose raw uplinks
 * arrive over MQTT and over HTTP.
 */
const ROOT = 'svc/generic/v2/codecs';
const codecs = suite<{ t: TestPlatform; p: Provider; reviewed: Record<string, any>[] }>('Device-repository codecs: import, examples at upload, decoding at ingest');

codecs.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.p = await givenProvider(ctx.t, 'codecs', deviceCodecs.map((c) => `${ROOT}/${c.name}`));
  // Each codec as reviewed: its field map, spec and examples with canonical outputs.
  ctx.reviewed = [];
  for (const codec of deviceCodecs) ctx.reviewed.push(await givenTranslator(ctx.t, reviewedTranslator(codec)));
});
codecs.after(async (ctx) => {
  await ctx.t.stop();
});

const importCodec = (t: TestPlatform, codec: DeviceCodec, extra: Record<string, unknown> = {}) =>
  t.call('POST', '/api/translators/import', { body: { code: codec.codec, codecYaml: codec.codecYaml, deviceYaml: codec.deviceYaml, ...extra } });

codecs('given each real codec and its repository YAML, when imported, then the proposal maps every example path onto canonical fields and uploads as it is, its examples passing', async ({ t }) => {
  for (const codec of deviceCodecs) {
    const res = await importCodec(t, codec);
    assert.is(res.status, 200, `${codec.name}: ${res.text}`);
    const { translator, review } = res.body as { translator: Record<string, any>; review: { note: string }[] };
    assert.ok(Object.keys(translator.fieldMap).length > 0, `${codec.name}: the proposal has a field map`);
    assert.ok(translator.examples.length > 0, `${codec.name}: the YAML's examples come along`);
    assert.match(translator.description, '### Decoded output');
    assert.ok(review.length > 0, `${codec.name}: the proposal says what was guessed`);
    const uploaded = await t.call('POST', '/api/translators', { body: translator });
    assert.is(uploaded.status, 201, `${codec.name}: the unedited proposal uploads: ${uploaded.text}`);
    const examples = (await t.call('GET', `/api/translators/${uploaded.body._id}`)).body.examples as { lastResult: { passed: boolean } }[];
    assert.ok(examples.every((e) => e.lastResult.passed), `${codec.name}: every example passed`);
  }
});

codecs('given the Elsys codec, when imported, then names and units are proposed as the data-model rules want, mV converted to V', async ({ t }) => {
  const { translator, review } = (await importCodec(t, elsysErsCo2)).body as { translator: Record<string, any>; review: { path?: string; note: string }[] };
  assert.equal(translator.fieldMap, {
    humidity: { field: 'relativeHumidity', unit: '%' },
    light: { field: 'illuminance', unit: 'lx' },
    vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.001 },
  });
  assert.equal(translator.spec.temperature, { type: 'number', unit: '°C', quantity: 'temperature' });
  assert.equal(translator.spec.motion, { type: 'number', unit: '', quantity: 'motion' });
  assert.is(translator.name, 'ers-co2');
  assert.equal(translator.match, { deviceModelName: 'ers-co2' });
  assert.equal(translator.examples[0].output, { temperature: 22.6, relativeHumidity: 41, illuminance: 39, motion: 6, co2: 1000, batteryVoltage: 3.6 });
  assert.ok(review.some((r) => r.path === 'vdd' && /mV/.test(r.note)), 'the guessed unit is in the review');
  assert.ok(review.some((r) => r.path === 'motion' && /no unit found/.test(r.note)));
});

codecs('given the Decentlab codec with {value, unit} objects, when imported, then the values are mapped with the stated units converted and the rest dropped', async ({ t }) => {
  const { translator } = (await importCodec(t, decentlabDlPr26)).body as { translator: Record<string, any> };
  assert.equal(translator.fieldMap['pressure.value'], { field: 'pressure', unit: 'Pa', scale: 100000 });
  assert.equal(translator.fieldMap['battery_voltage.value'], { field: 'batteryVoltage', unit: 'V' });
  assert.is(translator.unmapped, 'drop');
  assert.equal(translator.examples[0].output.pressure, 10000.6);
});

codecs('given the Dragino codec, when imported, then a null seen in an example is mapped with omitNull and its error example kept', async ({ t }) => {
  const { translator } = (await importCodec(t, draginoLht65)).body as { translator: Record<string, any> };
  assert.equal(translator.fieldMap.TempC_DS, { field: 'temperatureDs', unit: '°C', omitNull: true });
  assert.equal(translator.fieldMap.BatV, { field: 'batteryVoltage', unit: 'V' });
  assert.equal(translator.examples.at(-1), { description: 'Unknown FPort', input: { fPort: 42, bytes: [0xcb, 0xf6, 0x0b, 0x0d, 0x03, 0x76, 0x01, 0x0a, 0xdd, 0x7f, 0xff] }, errors: ['unknown FPort'] });
});

codecs('given an import whose YAML example nests deeper than stored data may, when imported, then that example is left out with a note', async ({ t }) => {
  const deep = `${'{"d": '.repeat(200)}1${'}'.repeat(200)}`;
  const codecYaml = `uplinkDecoder:\n  examples:\n    - description: deep\n      input: { fPort: 5, bytes: [1, 0, 10] }\n      output: { data: ${deep} }\n`;
  const res = await importCodec(t, elsysErsCo2, { codecYaml });
  assert.is(res.status, 200, res.text);
  assert.equal(res.body.translator.examples, []);
  assert.ok((res.body.review as { note: string }[]).some((r) => /example 0 \("deep"\): its data nests deeper than 32 levels; left out/.test(r.note)), JSON.stringify(res.body.review));
});

codecs('given an import, when the YAML does not parse or the code is not a codec, then 422 says which', async ({ t }) => {
  const badYaml = await importCodec(t, elsysErsCo2, { codecYaml: 'uplinkDecoder: [unclosed' });
  assert.is(badYaml.status, 422);
  assert.match(badYaml.text, /^ERR - codecYaml is not valid YAML/);
  const notCodec = await t.call('POST', '/api/translators/import', { body: { code: 'function translate() { return {}; }' } });
  assert.is(notCodec.status, 422);
  assert.match(notCodec.text, /^ERR - code defines no decodeUplink/);
  const broken = await t.call('POST', '/api/translators/import', { body: { code: 'function decodeUplink( {' } });
  assert.is(broken.status, 422);
  assert.match(broken.text, /^ERR - code SyntaxError/);
});

codecs('given an import whose YAML refers to itself, carries tags for binary data, sets or dates, or nests without end, then 422 says so and nothing runs', async ({ t }) => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ codecYaml: 'uplinkDecoder:\n  examples:\n    - description: &d {self: *d}\n      input: {fPort: 1, bytes: [1]}\n      output: {data: {temperature: 1}}\n' }, /^ERR - codecYaml refers to itself: an alias is used inside its own anchor$/],
    [{ deviceYaml: '&d {name: sensor, self: *d}\n' }, /^ERR - deviceYaml refers to itself/],
    [{ codecYaml: 'uplinkDecoder:\n  examples:\n    - description: !!binary aGVsbG8=\n      input: {fPort: 1, bytes: [1]}\n' }, /^ERR - codecYaml uses the tag !!binary: only plain data is read/],
    [{ codecYaml: 'uplinkDecoder:\n  examples:\n    - description: !!set {a, b}\n      input: {fPort: 1, bytes: [1]}\n' }, /^ERR - codecYaml uses the tag !!set/],
    [{ deviceYaml: 'name: sensor\nreleased: !!timestamp 2001-12-14\n' }, /^ERR - deviceYaml uses the tag !!timestamp/],
    [{ deviceYaml: `name: ${'['.repeat(300)}${']'.repeat(300)}\n` }, /^ERR - deviceYaml nests deeper than 256 levels$/],
    [{ deviceYaml: `name: ${'['.repeat(20_000)}${']'.repeat(20_000)}\n` }, /^ERR - deviceYaml is not valid YAML: /],
    [{ deviceYaml: 'name: sensor\nrange: .inf\n' }, /^ERR - deviceYaml holds Infinity, which is not a finite number$/],
  ];
  for (const [yaml, message] of cases) {
    const res = await importCodec(t, elsysErsCo2, yaml);
    assert.is(res.status, 422, `${JSON.stringify(yaml)}: ${res.text}`);
    assert.match(res.text, message);
  }
});

codecs('given an import or an upload of code nested 100,000 levels deep, then 422 says it nests too deeply to compile', async ({ t }) => {
  const code = `var x = ${'['.repeat(100_000)}${']'.repeat(100_000)};\nfunction decodeUplink() { return { data: {} }; }`;
  const imported = await t.call('POST', '/api/translators/import', { body: { code } });
  assert.is(imported.status, 422, imported.text);
  assert.match(imported.text, /^ERR - code the code nests too deeply to be compiled/);
  const uploaded = await t.call('POST', '/api/translators', { body: reviewedTranslator(elsysErsCo2, { name: 'deep-code', code, examples: [] }) });
  assert.is(uploaded.status, 422, uploaded.text);
  assert.match(uploaded.text, /^ERR - code the code nests too deeply to be compiled/);
});

codecs('given an import with more examples than an upload carries, or a codec giving more values than a spec declares, then 422 names the cap before any runs', async ({ t }) => {
  const example = '    - input: { fPort: 5, bytes: [1, 0, 10] }\n      output: { data: { temperature: 1 } }\n';
  const uplinks = await importCodec(t, elsysErsCo2, { codecYaml: `uplinkDecoder:\n  examples:\n${example.repeat(51)}` });
  assert.is(uplinks.status, 422, uplinks.text);
  assert.is(uplinks.text, 'ERR - codecYaml has 51 uplink examples, more than the 50 an import runs');
  const downlink = '    - input: { data: { interval: 60 } }\n      output: { bytes: [1], fPort: 1 }\n';
  const downlinks = await importCodec(t, elsysErsCo2, { codecYaml: `uplinkDecoder:\n  examples:\n${example}downlinkEncoder:\n  examples:\n${downlink.repeat(51)}` });
  assert.is(downlinks.status, 422, downlinks.text);
  assert.is(downlinks.text, 'ERR - codecYaml has 51 downlinkEncoder examples, more than the 50 an import runs');
  const wide = await importCodec(t, elsysErsCo2, {
    code: 'function decodeUplink() { var data = {}; for (var i = 0; i < 600; i++) data["k" + i] = i; return { data: data }; }',
    codecYaml: `uplinkDecoder:\n  examples:\n${example}`,
  });
  assert.is(wide.status, 422, wide.text);
  assert.match(wide.text, /^ERR - code gives 600 values on the examples of codecYaml, more than the 500 fields a spec may declare/);
});

codecs('given each reviewed codec uploaded with its field map and examples, when its raw uplinks arrive over MQTT, then the device holds exactly the canonical fields', async ({ t, p, reviewed }) => {
  const c = await connectMqtt(t, p.username, p.password);
  for (const [n, codec] of deviceCodecs.entries()) {
    assert.ok(reviewed[n]!.examples.every((e: any) => e.lastResult.passed), `${codec.name}: its examples passed at upload`);
    const topic = `${ROOT}/${codec.name}`;
    await publish(c, topic, { hello: codec.name });
    const device = await deviceOf(t, topic);
    const put = await t.call('PUT', `/api/iotnodes/${device._id}`, { body: { translatorPreferences: [{ name: codec.name, version: '1.0.0', upgradePolicy: 'none' }] } });
    assert.is(put.status, 200, put.text);
    for (const [i, frame] of codec.uplinks.entries()) {
      await publish(c, topic, { encodedData: { hexEncoded: frame.hex, port: frame.fPort }, frame: i });
      const decoded = await deviceWhen(t, device._id, (d) => d.frame === i, `${codec.name} frame ${i}`);
      for (const [field, value] of Object.entries(frame.canonical)) assert.equal(decoded[field], value, `${codec.name} frame ${i}: ${field}`);
    }
  }
  await c.endAsync();
});

codecs('given a reviewed codec, when its uplinks are posted over HTTP, then they decode the same; a frame the codec refuses is stored raw with its errors logged, and the next decodes', async ({ t }) => {
  for (const codec of deviceCodecs) {
    const device = await t.call('POST', '/api/iotnodes', { body: { name: `http ${codec.name}`, deviceModelName: codec.name } });
    assert.is(device.status, 201, device.text);
    const id = device.body._id as string;
    for (const frame of codec.uplinks) {
      const after = await uplink(t, id, frame.hex, frame.fPort);
      for (const [field, value] of Object.entries(frame.canonical)) assert.equal(after[field], value, `${codec.name}: ${field}`);
    }
    if (!codec.refused) continue;
    const raw = await uplink(t, id, codec.refused.hex, codec.refused.fPort);
    assert.equal(raw.encodedData, { hexEncoded: codec.refused.hex, port: codec.refused.fPort }, 'stored undecoded');
    const failure = `Translator ${codec.name} 1.0.0 failed (codec): decodeUplink reported an error: ${codec.refused.errors[0]}`;
    // Log writes are asynchronous, and the codec's dropped data has an entry of its own.
    const entry = await eventually(async () => (await logsAtLeast(t, id, 1)).find((l) => l.message === failure), 10_000, 'the codec failure entry');
    assert.equal([entry!.type, entry!.category, entry!.priority], ['debug', 'system', 'medium'], 'the type and category of translator errors');
    assert.equal(entry!.data?.errors, codec.refused.errors);
    const again = await uplink(t, id, codec.uplinks[0]!.hex, codec.uplinks[0]!.fPort);
    assert.equal(again.encodedData.hexEncoded, codec.uplinks[0]!.hex);
    for (const [field, value] of Object.entries(codec.uplinks[0]!.canonical)) assert.equal(again[field], value, `${codec.name}: ${field} after the refused frame`);
  }
});

codecs('given a codec that warns with its data, when an uplink decodes, then the data is stored and the warning is a lower-priority entry of the same type and category', async ({ t }) => {
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'elsys warning', deviceModelName: elsysErsCo2.name } })).body._id as string;
  // Temperature, then an item type the codec does not know.
  const after = await uplink(t, device, '0100e2' + '99' + '0102', 5);
  assert.is(after.temperature, 22.6);
  const [entry] = await logsAtLeast(t, device, 1);
  assert.is(entry!.message, `Translator ${elsysErsCo2.name} 1.0.0 warned: unknown data type 0x99 at byte 3; the rest is ignored`);
  assert.equal([entry!.type, entry!.category, entry!.priority], ['debug', 'system', 'low']);
});

codecs('given a codec with unmapped: drop, when uplinks drop data, then one debug entry counts them, not one per uplink', async ({ t }) => {
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'decentlab drops', deviceModelName: decentlabDlPr26.name } })).body._id as string;
  for (let i = 0; i < 3; i++) await uplink(t, device, decentlabDlPr26.uplinks[1]!.hex, 1);
  await settle(t);
  const logs = await logsOf(t, device);
  assert.is(logs.length, 1, JSON.stringify(logs.map((l) => l.message)));
  assert.match(logs[0]!.message, /^Translator decentlab-dl-pr26 1\.0\.0 dropped data neither in its fieldMap nor in its spec from 1 uplink since \S+: protocol_version, battery_voltage\.displayName, battery_voltage\.unit$/);
  assert.is(logs[0]!.type, 'debug');
});

codecs('given decoded codec uplinks, when the read models are rebuilt, then the canonical fields come back from the events and no codec runs', async ({ t }) => {
  const device = (await t.call('POST', '/api/iotnodes', { body: { name: 'rebuild codec', deviceModelName: draginoLht65.name } })).body._id as string;
  const before = await uplink(t, device, draginoLht65.uplinks[0]!.hex, 2);
  const reports = (await t.platform.deps.store.readStream(`device-${device}`)).filter((e) => e.type === 'DeviceReported');
  assert.is((reports.at(-1)!.data as { payload: Record<string, unknown> }).payload.externalTemperature, 27.81, 'the event carries the decoded fields');
  const calls = t.platform.translation.calls;
  await rebuild(t.platform.deps.store, t.platform.deps.db, pino({ level: 'silent' }));
  const after = (await t.call('GET', `/api/iotnodes/${device}`)).body;
  assert.is(t.platform.translation.calls, calls, 'no codec ran during the rebuild');
  for (const field of Object.keys(draginoLht65.uplinks[0]!.canonical)) assert.equal(after[field], before[field], field);
});

codecs('given the reviewed translators, when examples are read back, then each shows its input, expected output and last result', async ({ t }) => {
  const list = (await t.call('GET', `/api/translators?name=${elsysErsCo2.name}`)).body as Record<string, any>[];
  assert.is(list[0]!.examples, undefined, 'the list leaves examples out, like code');
  assert.equal(list[0]!.fieldMap, elsysErsCo2.fieldMap);
  const one = (await t.call('GET', `/api/translators/${list[0]!._id}`)).body;
  const expected = examplesOf(elsysErsCo2);
  assert.is(one.examples.length, expected.length);
  assert.equal(one.examples[0].output, expected[0]!.output);
  assert.is(one.examples[0].lastResult.passed, true);
  assert.equal(one.examples[0].lastResult.output, expected[0]!.output);
  assert.match(one.examples[0].lastResult.ranAt, /^\d{4}-\d{2}-\d{2}T/);
});

codecs.run();
