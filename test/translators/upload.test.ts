import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser } from '../users/given.js';
import { climateSensor, givenDevice, givenTranslator, messageOf, translator } from './given.js';

const upload = suite<{ t: TestPlatform }>('Translators: upload, list, read, delete');

upload.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
upload.after(async (ctx) => {
  await ctx.t.stop();
});

const post = (t: TestPlatform, overrides: Record<string, unknown>, token?: string) => t.call('POST', '/api/translators', { body: translator(overrides), ...(token ? { token } : {}) });

/** A refused upload: its status, its message (the text, or `message` of a JSON list of problems), and nothing stored. */
async function refused(t: TestPlatform, overrides: Record<string, unknown>, status: number, message: RegExp): Promise<void> {
  const before = await eventCount(t);
  const res = await post(t, overrides);
  assert.is(res.status, status, res.text);
  assert.match(messageOf(res), message);
  assert.is(await eventCount(t), before, 'a refused upload stores nothing');
}

upload('when a valid translator is uploaded, then it is answered with an id and can be read with its code', async ({ t }) => {
  const created = await givenTranslator(t, { name: 'read-me' });
  assert.match(created._id, /^[0-9a-f]{24}$/);
  const one = await t.call('GET', `/api/translators/${created._id}`);
  assert.is(one.status, 200);
  assert.is(one.body.name, 'read-me');
  assert.is(one.body.version, '1.0.0');
  assert.is(one.body.apiVersion, '1.0');
  assert.equal(one.body.spec, climateSensor.spec);
  assert.equal(one.body.match, { deviceModelName: 'acme-th-01' });
  assert.is(one.body.code, climateSensor.code);
});

upload('when translators are listed, then name and deviceModelName filter exactly, newest version first, without code', async ({ t }) => {
  await givenTranslator(t, { name: 'list-a', version: '1.0.0', match: { deviceModelName: 'model-x' } });
  await givenTranslator(t, { name: 'list-a', version: '1.10.0', match: { deviceModelName: 'model-x' } });
  await givenTranslator(t, { name: 'list-a', version: '1.2.0', match: { deviceModelName: 'model-x' } });
  await givenTranslator(t, { name: 'list-b', version: '1.0.0', match: { deviceModelName: 'model-y' } });
  const byName = await t.call('GET', '/api/translators?name=list-a');
  assert.equal(byName.body.map((x: any) => x.version), ['1.10.0', '1.2.0', '1.0.0']);
  assert.is(byName.body[0].code, undefined);
  const byModel = await t.call('GET', '/api/translators?deviceModelName=model-y');
  assert.equal(byModel.body.map((x: any) => x.name), ['list-b']);
  const none = await t.call('GET', '/api/translators?deviceModelName=model');
  assert.equal(none.body, []);
});

upload('when translators are listed by match.deviceModelName, then the dotted and the bracket forms filter exactly; an unknown match key is 422', async ({ t }) => {
  await givenTranslator(t, { name: 'match-a', match: { deviceModelName: 'model-m' } });
  await givenTranslator(t, { name: 'match-b', match: { deviceModelName: 'model-n' } });
  const dotted = await t.call('GET', '/api/translators?match.deviceModelName=model-m');
  assert.is(dotted.status, 200, dotted.text);
  assert.equal(dotted.body.map((x: any) => x.name), ['match-a']);
  const bracket = await t.call('GET', '/api/translators?match[deviceModelName]=model-n');
  assert.is(bracket.status, 200, bracket.text);
  assert.equal(bracket.body.map((x: any) => x.name), ['match-b']);
  const both = await t.call('GET', '/api/translators?name=match-a&match.deviceModelName=model-n');
  assert.equal(both.body, [], 'filters combine with AND');
  assert.equal((await t.call('GET', '/api/translators?match.deviceModelName=model')).body, []);
  const unknown = await t.call('GET', '/api/translators?match[firmware]=2');
  assert.is(unknown.status, 422, unknown.text);
  assert.is((await t.call('GET', '/api/translators?deviceModelNames=model-m')).status, 422);
});

upload('when any user reads the catalogue, then it is shared; uploading and deleting need the role (admins by default)', async ({ t }) => {
  const viewer = await givenUser(t, 'tr-viewer');
  const created = await givenTranslator(t, { name: 'shared-one' });
  const list = await t.call('GET', '/api/translators?name=shared-one', { token: viewer.token });
  assert.is(list.status, 200);
  assert.is(list.body.length, 1);
  assert.is((await t.call('GET', `/api/translators/${created._id}`, { token: viewer.token })).status, 200);
  const posted = await post(t, { name: 'viewer-upload' }, viewer.token);
  assert.is(posted.status, 403);
  assert.is(posted.text, 'Forbidden');
  assert.is((await t.call('DELETE', `/api/translators/${created._id}`, { token: viewer.token })).status, 403);
});

upload('when the code is larger than 256 KiB, then 413 names the cap', async ({ t }) => {
  const code = `function translate() { return {}; }\n//${'x'.repeat(256 * 1024)}`;
  await refused(t, { name: 'too-big', code }, 413, /^ERR - code is larger than 262144 bytes/);
});

upload('when the code is larger than the 1 MiB JSON body limit, then the generic body-size 413 answers before any translator check', async ({ t }) => {
  const code = `function translate() { return {}; }\n//${'x'.repeat(1024 * 1024)}`;
  await refused(t, { name: 'far-too-big', code }, 413, /^ERR - body is larger than 1048576 bytes$/);
});

upload('when the code never defines translate, then 422 says so', async ({ t }) => {
  await refused(t, { name: 'no-translate', code: 'function decode() { return {}; }' }, 422, /^ERR - code .*translate or decodeUplink/);
});

upload('when the code has a syntax error, then 422 gives the error with its line and column, once', async ({ t }) => {
  const before = await eventCount(t);
  const res = await post(t, { name: 'broken', code: 'function translate() {\n  return {\n    result: { temperature: 1 ;\n  };\n}' });
  assert.is(res.status, 422, res.text);
  assert.is(res.text, "ERR - code SyntaxError: expecting '}' (line 3, column 30)");
  assert.is(await eventCount(t), before, 'a refused upload stores nothing');
});

upload('when the code closes the function it runs in to keep state outside it, then 422 at its first line and nothing is stored', async ({ t }) => {
  const code = "})(); })\n;let kept = [];\n(function () { return (function () {\nfunction translate({ encodedData }) { kept.push(encodedData.hexEncoded); return { result: { temperature: kept.length } }; }";
  await refused(t, { name: 'breakout', code }, 422, /^ERR - code SyntaxError: .*\(line 1, column 1\)$/);
});

upload('when the code loops forever at its top level, then 422 and the platform keeps serving', async ({ t }) => {
  await refused(t, { name: 'top-loop', code: 'while (true) {}\nfunction translate() { return {}; }' }, 422, /^ERR - code /);
  assert.is((await t.call('GET', '/api/health', { token: null })).status, 200);
});

upload('when the spec has an unknown type, a non-SI unit, a unit on a string, or a name that is not flat lowerCamelCase, then 422 names the field', async ({ t }) => {
  await refused(t, { name: 'bad-type', spec: { temperature: 'float' } }, 422, /^ERR - spec\.temperature has unknown type 'float'/);
  await refused(t, { name: 'bad-unit', spec: { pressure: { type: 'number', unit: 'hPa', quantity: 'pressure' } } }, 422, /^ERR - spec\.pressure has unit 'hPa'/);
  await refused(t, { name: 'kelvin', spec: { temperature: { type: 'number', unit: 'K', quantity: 'temperature' } } }, 422, /^ERR - spec\.temperature has unit 'K', which is not an accepted SI symbol/);
  await refused(t, { name: 'unit-string', spec: { state: { type: 'string', unit: 'V', quantity: 'state' } } }, 422, /^ERR - spec\.state .*only numbers carry units/);
  await refused(t, { name: 'snake-case', spec: { battery_voltage: 'number' } }, 422, /^ERR - spec\.battery_voltage is not a flat lowerCamelCase name/);
  await refused(t, { name: 'reserved-field', spec: { secret: 'string' } }, 422, /^ERR - spec\.secret identifies the device or belongs to the platform, so ingest never stores it from a translator/);
});

upload('when the version is not a semantic version, then 422', async ({ t }) => {
  for (const version of ['1.0', 'v1.0.0', '01.0.0', '1.0.0.0', 'latest']) {
    await refused(t, { name: 'not-semver', version }, 422, /^ERR - version must be a semantic version/);
  }
});

upload('when the name is not lowercase with dashes starting with a letter, then 422 names it', async ({ t }) => {
  for (const name of ['Acme', '1acme', 'acme_climate', 'acme--climate', 'acme-']) {
    await refused(t, { name }, 422, /^ERR - name /);
  }
});

upload('when a parameter default does not have its declared type, then 422 names it', async ({ t }) => {
  await refused(t, { name: 'bad-default', parameters: { highAlarmAbove: { type: 'number', description: 'limit', default: 'high' } } }, 422, /^ERR - parameters\.highAlarmAbove\.default /);
});

upload('when the same name and version is uploaded twice, then 409', async ({ t }) => {
  await givenTranslator(t, { name: 'twice' });
  await refused(t, { name: 'twice' }, 409, /^ERR - version 1\.0\.0 of translator twice already exists/);
});

upload('versioning: when a minor or patch release changes the data model, then 422 names the field', async ({ t }) => {
  await givenTranslator(t, { name: 'versioned', version: '1.0.0' });
  const { temperature, relativeHumidity, batteryVoltage } = climateSensor.spec;
  await refused(t, { name: 'versioned', version: '1.1.0', spec: { ...climateSensor.spec, co2: { type: 'number', unit: 'ppm', quantity: 'co2' } } }, 422, /^ERR - spec\.co2 was added compared to version 1\.0\.0.*raise the major version/);
  await refused(t, { name: 'versioned', version: '1.0.1', spec: { temperature, relativeHumidity } }, 422, /^ERR - spec\.batteryVoltage was removed or renamed/);
  await refused(t, { name: 'versioned', version: '1.1.0', spec: { temperature, relativeHumidity, battery: batteryVoltage } }, 422, /^ERR - spec\.batteryVoltage was removed or renamed/);
  await refused(t, { name: 'versioned', version: '1.1.0', spec: { ...climateSensor.spec, temperature: { type: 'number', unit: '', quantity: 'temperature' } } }, 422, /^ERR - spec\.temperature changed its unit from '°C' to ''/);
  await refused(t, { name: 'versioned', version: '1.1.0', spec: { ...climateSensor.spec, relativeHumidity: 'string' } }, 422, /^ERR - spec\.relativeHumidity changed its type from number to string/);
});

upload('versioning: when the major version is raised with an identical spec, then 422; with a changed spec, then it is accepted', async ({ t }) => {
  await givenTranslator(t, { name: 'major', version: '1.0.0' });
  await givenTranslator(t, { name: 'major', version: '1.1.0', code: climateSensor.code.replace('_.round', '_.floor') });
  await refused(t, { name: 'major', version: '2.0.0' }, 422, /^ERR - version raises the major version over 1\.1\.0 but the spec is unchanged/);
  await givenTranslator(t, { name: 'major', version: '2.0.0', spec: { ...climateSensor.spec, co2: { type: 'number', unit: 'ppm', quantity: 'co2' } } });
  // A late patch of the 1.x line is compared with 1.1.0, the highest version below it.
  await givenTranslator(t, { name: 'major', version: '1.1.1' });
});

upload('versioning: when a version is uploaded below an existing one, then it is also checked against the lowest version above it', async ({ t }) => {
  const specA = climateSensor.spec;
  const specB = { ...specA, co2: { type: 'number', unit: 'ppm', quantity: 'co2' } };
  const specC = { ...specA, pressure: { type: 'number', unit: 'Pa', quantity: 'airPressure' } };
  await givenTranslator(t, { name: 'gaps', version: '1.0.0', spec: specA });
  await givenTranslator(t, { name: 'gaps', version: '3.0.0', spec: specC });
  // 2.0.0 → 3.0.0 would raise the major version with an unchanged data model.
  await refused(t, { name: 'gaps', version: '2.0.0', spec: specC }, 422, /^ERR - version is below 3\.0\.0, which raises the major version over it, but has the same spec/);
  // 0.9.0 → 1.0.0 is a major raise, so 1.0.0's spec must differ from 0.9.0's.
  await refused(t, { name: 'gaps', version: '0.9.0', spec: specA }, 422, /^ERR - version is below 1\.0\.0, which raises the major version over it, but has the same spec/);
  await givenTranslator(t, { name: 'gaps', version: '0.9.0', spec: specB });
  await givenTranslator(t, { name: 'gaps', version: '2.0.0', spec: specB });
  assert.equal((await t.call('GET', '/api/translators?name=gaps')).body.map((x: any) => x.version), ['3.0.0', '2.0.0', '1.0.0', '0.9.0']);
});

upload('versioning: when a version is uploaded below a later one of the same major version with another spec, then 422 names the field', async ({ t }) => {
  const { temperature, relativeHumidity } = climateSensor.spec;
  await givenTranslator(t, { name: 'same-major', version: '1.2.0' });
  await refused(t, { name: 'same-major', version: '1.1.0', spec: { temperature, relativeHumidity } }, 422, /^ERR - spec\.batteryVoltage was removed or renamed compared to version 1\.2\.0, a later version of the same major version/);
  await refused(t, { name: 'same-major', version: '1.0.0', spec: { ...climateSensor.spec, relativeHumidity: 'number' } }, 422, /^ERR - spec\.relativeHumidity changed its unit from '%' to none compared to version 1\.2\.0/);
  await givenTranslator(t, { name: 'same-major', version: '1.1.0' });
});

upload('when a translator version is in use by a device, then DELETE is 409; once unused, then 204 and it is gone', async ({ t }) => {
  const used = await givenTranslator(t, { name: 'in-use', version: '1.0.0', match: {} });
  const device = await givenDevice(t, { name: 'user of in-use', translatorPreferences: [{ name: 'in-use', version: '1.0.0', upgradePolicy: 'none' }] });
  const refusedDelete = await t.call('DELETE', `/api/translators/${used._id}`);
  assert.is(refusedDelete.status, 409, refusedDelete.text);
  assert.match(refusedDelete.text, /in use by 1 iotnode/);
  const put = await t.call('PUT', `/api/iotnodes/${device._id}`, { body: { translatorPreferences: null } });
  assert.is(put.status, 200, put.text);
  const deleted = await t.call('DELETE', `/api/translators/${used._id}`);
  assert.is(deleted.status, 204, deleted.text);
  assert.is((await t.call('GET', `/api/translators/${used._id}`)).status, 404);
  assert.is((await t.call('DELETE', `/api/translators/${used._id}`)).status, 404);
});

upload('when a device model name matches a translator, then that translator is in use by it', async ({ t }) => {
  const used = await givenTranslator(t, { name: 'model-used', match: { deviceModelName: 'model-used-1' } });
  await givenDevice(t, { name: 'model device', deviceModelName: 'model-used-1' });
  assert.is((await t.call('DELETE', `/api/translators/${used._id}`)).status, 409);
});

upload.run();
