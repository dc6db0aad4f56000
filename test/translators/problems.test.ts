import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount } from '../users/given.js';
import { givenDevice, givenTranslator, logsAtLeast, translator, uplink } from './given.js';
import { draginoLht65, elsysErsCo2, reviewedTranslator } from './codecs/index.js';
import { checkFields, type TranslatorFields } from '../../domain/translators/translator.js';
import { ValidationError } from '../../domain/shared/errors.js';

/**
 * An upload is refused for everything wrong with it at once: fixing a codec
 * must not take one upload per field name.
 */
const problems = suite<{ t: TestPlatform }>('Translators: every problem of an upload at once, and bad codec input');

problems.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
problems.after(async (ctx) => {
  await ctx.t.stop();
});

interface Refusal {
  message: string;
  errors: { field: string; problem: string }[];
}

/** An upload refused with a JSON list of problems, storing nothing. */
async function refusedWithAll(t: TestPlatform, body: Record<string, unknown>): Promise<Refusal> {
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/translators', { body });
  assert.is(res.status, 422, res.text);
  assert.match(String(res.headers.get('content-type')), 'application/json');
  const refusal = res.body as Refusal;
  const [first] = refusal.errors;
  assert.ok(first, 'at least one problem');
  assert.is(refusal.message, `ERR - ${first!.field} ${first!.problem}`, 'the message is the first problem, in the contract’s form');
  assert.is(await eventCount(t), before, 'a refused upload stores nothing');
  return refusal;
}

const has = (refusal: Refusal, field: string, problem: string | RegExp) =>
  assert.ok(
    refusal.errors.some((e) => e.field === field && (typeof problem === 'string' ? e.problem.includes(problem) : problem.test(e.problem))),
    `no problem ${field} ${String(problem)} in\n${refusal.errors.map((e) => `${e.field} ${e.problem}`).join('\n')}`,
  );

problems('when the spec, parameters, field map and examples each have problems, then one 422 names every one of them', async ({ t }) => {
  const refusal = await refusedWithAll(t, {
    ...reviewedTranslator(elsysErsCo2, { name: 'many-problems' }),
    spec: {
      ...elsysErsCo2.spec,
      humidityRaw: 'float',
      battery_level: 'number',
      pressure: { type: 'number', unit: 'hPa', quantity: 'pressure' },
      lnglat: 'object',
    },
    parameters: { limit: { type: 'number', description: 'a limit', default: 'high' } },
    fieldMap: {
      ...elsysErsCo2.fieldMap,
      light: { field: 'relativeHumidity', unit: '%' },
      motion: { field: 'motionCount', unit: 'counts' },
    },
    examples: [{ description: 'no input', input: { hexEncoded: 'zz', port: 1 }, output: {} }, { input: { bytes: [1], fPort: 5 } }],
  });
  has(refusal, 'spec.humidityRaw', "has unknown type 'float'");
  has(refusal, 'spec.battery_level', 'is not a flat lowerCamelCase name');
  has(refusal, 'spec.pressure', "has unit 'hPa'");
  has(refusal, 'spec.lnglat', 'must be a geoJsonPoint');
  has(refusal, 'parameters.limit.default', 'does not match its type number');
  has(refusal, 'fieldMap["light"].field', "maps to 'relativeHumidity', as fieldMap[\"humidity\"] does");
  has(refusal, 'fieldMap["motion"].unit', "is 'counts', which is not an accepted SI symbol");
  has(refusal, 'examples[0].input.hexEncoded', 'must be a hex string of whole bytes');
  has(refusal, 'examples[1]', 'needs either output');
  assert.ok(refusal.errors.length >= 9);
});

problems('when the spec declares fields ingest never stores, then each is refused with the reason', async ({ t }) => {
  const refusal = await refusedWithAll(t, translator({ name: 'reserved-names', spec: { _id: 'string', name: 'string', createdAt: 'date', reportedAt: 'date', updatedAt: 'date', secret: 'string', translatorPreferences: 'array', temperature: 'number' } }));
  for (const field of ['_id', 'createdAt', 'reportedAt', 'updatedAt']) has(refusal, `spec.${field}`, 'is set by the platform itself, so ingest never stores it from a translator');
  for (const field of ['name', 'secret', 'translatorPreferences']) has(refusal, `spec.${field}`, 'identifies the device or belongs to the platform, so ingest never stores it');
  assert.is(refusal.errors.filter((e) => e.field === 'spec._id').length, 1, 'one reason per field, not also "not lowerCamelCase"');
});

problems('when a field map maps two paths to one field, to a reserved name, or names a unit that is not accepted, then 422 says so; with translate in the code, a field map is refused', async ({ t }) => {
  const base = reviewedTranslator(elsysErsCo2, { name: 'bad-maps' });
  has(await refusedWithAll(t, { ...base, fieldMap: { ...elsysErsCo2.fieldMap, motion: { field: 'illuminance' } } }), 'fieldMap["motion"].field', 'each field comes from one path');
  has(await refusedWithAll(t, { ...base, fieldMap: { ...elsysErsCo2.fieldMap, motion: { field: 'reportedAt' } } }), 'fieldMap["motion"].field', "maps to 'reportedAt', which is set by the platform itself");
  has(await refusedWithAll(t, { ...base, fieldMap: { ...elsysErsCo2.fieldMap, vdd: { field: 'batteryVoltage', unit: 'mV' } } }), 'fieldMap["vdd"].unit', "is 'mV', which is not an accepted SI symbol");
  const withTranslate = await t.call('POST', '/api/translators', { body: { ...base, code: `${elsysErsCo2.codec}\nfunction translate() { return {}; }`, examples: [] } });
  assert.is(withTranslate.status, 422, withTranslate.text);
  assert.match(withTranslate.text, /^ERR - fieldMap maps the data of decodeUplink, but this code defines translate/);
});

problems('when examples or field-map paths hold what cannot be stored, then the REST edge refuses the upload naming the first, and the upload check names them all', async ({ t }) => {
  let deep: unknown = 1;
  for (let i = 0; i < 40; i++) deep = { d: deep };
  const body = reviewedTranslator(elsysErsCo2, {
    name: 'unstorable',
    fieldMap: { ...elsysErsCo2.fieldMap, 'motion\u0000': { field: 'motionCount' } },
    examples: [
      { description: 'nul', input: { fPort: 5, bytes: [1] }, output: { label: 'a\u0000' } },
      { description: 'deep', input: { fPort: 5, bytes: [1] }, output: { deep } },
      { description: '\ud800', input: { fPort: 5, bytes: [1] }, output: {} },
    ],
  });
  // Over REST the one check of text and depth for every body answers first (docs/security.md): before any route code runs.
  const before = await eventCount(t);
  const res = await t.call('POST', '/api/translators', { body });
  assert.is(res.status, 422, res.text);
  assert.is(res.text, 'ERR - fieldMap.motion\\u0000 is a field name that must not contain NUL characters');
  assert.is(await eventCount(t), before, 'a refused upload stores nothing');
  // The upload's own check, which also guards translators that do not arrive as a REST body, names every one at once.
  const fields = { apiVersion: '1.0', description: '', match: {}, parameters: {}, fieldMap: {}, unmapped: 'reject', examples: [], ...body } as unknown as TranslatorFields;
  let refused: unknown;
  try {
    checkFields(fields);
  } catch (error) {
    refused = error;
  }
  assert.instance(refused, ValidationError);
  const refusal = { message: (refused as ValidationError).message, errors: (refused as ValidationError).problems ?? [] };
  has(refusal, 'fieldMap["motion\\u0000"]', 'contains a NUL character');
  has(refusal, 'examples[0]', 'examples[0].output.label: contains a NUL character');
  has(refusal, 'examples[1]', 'nests deeper than 32 levels');
  has(refusal, 'examples[2]', 'examples[2].description: contains a lone surrogate');
});

problems('when examples do not pass in the sandbox, then 422 names each by index and description with the first field that differs', async ({ t }) => {
  const [ok, probe] = reviewedTranslator(draginoLht65).examples as Record<string, any>[];
  const refusal = await refusedWithAll(t, reviewedTranslator(draginoLht65, {
    name: 'failing-examples',
    examples: [
      ok,
      { ...probe, output: { ...probe!.output, temperature: -19.5 } },
      { description: 'expects an error', input: ok!.input, errors: ['unknown FPort'] },
      { description: 'wrong port', input: { fPort: 42, bytes: [1] }, output: { temperature: 1 } },
    ],
  }));
  assert.equal(refusal.errors.map((e) => e.field), ['examples[1]', 'examples[2]', 'examples[3]']);
  has(refusal, 'examples[1]', '("Probe disconnected: its null is left out") output.temperature is -20, expected -19.5');
  has(refusal, 'examples[2]', '("expects an error") decoded without errors, expected the errors ["unknown FPort"]');
  has(refusal, 'examples[3]', '("wrong port") failed (codec): decodeUplink reported an error: unknown FPort');
});

problems('when a minor release changes several fields, then 422 lists every change; a changed scaling needs a major release too', async ({ t }) => {
  await givenTranslator(t, reviewedTranslator(elsysErsCo2, { name: 'versions' }));
  const { temperature, co2, ...rest } = elsysErsCo2.spec;
  void temperature;
  void co2;
  const refusal = await refusedWithAll(t, reviewedTranslator(elsysErsCo2, {
    name: 'versions',
    version: '1.1.0',
    spec: { ...rest, relativeHumidity: 'string', soundLevel: { type: 'number', unit: 'dB', quantity: 'soundLevel' } },
    fieldMap: { humidity: { field: 'relativeHumidity' }, light: { field: 'illuminance' }, motion: { field: 'motionCount' }, vdd: { field: 'batteryVoltage', scale: 0.001 } },
    examples: [],
  }));
  has(refusal, 'spec.temperature', 'was removed or renamed compared to version 1.0.0');
  has(refusal, 'spec.co2', 'was removed or renamed');
  has(refusal, 'spec.relativeHumidity', 'changed its type from number to string');
  has(refusal, 'spec.soundLevel', 'was added');

  const rescaled = await refusedWithAll(t, reviewedTranslator(elsysErsCo2, { name: 'versions', version: '1.1.0', fieldMap: { ...elsysErsCo2.fieldMap, vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.01 } }, examples: [] }));
  has(rescaled, 'spec.batteryVoltage', 'changed its scaling from ×0.001 to ×0.01 compared to version 1.0.0, which changes the data model');
  await givenTranslator(t, reviewedTranslator(elsysErsCo2, { name: 'versions', version: '2.0.0', fieldMap: { ...elsysErsCo2.fieldMap, vdd: { field: 'batteryVoltage', unit: 'V', scale: 0.01 } }, examples: [] }));
});

problems('when a codec’s decodeUplink returns a non-object or throws at run time, then each is a device log entry and the next uplink decodes', async ({ t }) => {
  await givenTranslator(t, {
    name: 'flaky-codec',
    match: {},
    spec: { temperature: 'number' },
    code: `function decodeUplink(input) {
      if (input.fPort === 1) return 'not an object';
      if (input.fPort === 2) throw new RangeError('frame too short');
      return { data: { temperature: input.bytes[0] } };
    }`,
  });
  const device = (await givenDevice(t, { name: 'flaky', translatorPreferences: [{ name: 'flaky-codec', version: '1.0.0', upgradePolicy: 'none' }] }))._id as string;
  await uplink(t, device, '01', 1);
  await uplink(t, device, '02', 2);
  assert.is((await uplink(t, device, '15', 3)).temperature, 21, 'the next uplink decodes');
  const logs = await logsAtLeast(t, device, 2);
  const messages = logs.map((l) => l.message).sort();
  assert.match(messages[0]!, /^Translator flaky-codec 1\.0\.0 failed \(result\): decodeUplink must return an object like \{data: \{\.\.\.\}\}, it returned string/);
  assert.match(messages[1]!, /^Translator flaky-codec 1\.0\.0 failed \(runtime\): RangeError: frame too short \(line 3, column \d+\)/);
});

problems.run();
