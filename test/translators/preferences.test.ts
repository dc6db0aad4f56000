import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { parseSemver, type UpgradePolicy } from '../../domain/translators/semver.js';
import { resolveModel, resolvePreference, type Candidate } from '../../domain/translators/preferences.js';
import { climateHex, givenDevice, givenTranslator, uplink } from './given.js';

const ADMIN_ID = '00000000-0000-4000-8000-000000000001';
const OTHER_ID = '00000000-0000-4000-8000-000000000002';

const candidate = (version: string, extra: Partial<Candidate> = {}): Candidate => ({
  id: version,
  name: 'acme',
  version: parseSemver(version)!,
  createdBy: ADMIN_ID,
  deviceModelName: null,
  ...extra,
});

const uploaded = ['1.0.0', '1.0.5', '1.0.2', '1.1.0', '1.2.0-beta.1', '2.0.0', '2.1.0', '2.1.1-rc.1'].map((v) => candidate(v));
const pick = (version: string, upgradePolicy: UpgradePolicy, extra: { userId?: string; name?: string } = {}) =>
  resolvePreference({ name: extra.name ?? 'acme', version, upgradePolicy, ...(extra.userId ? { userId: extra.userId } : {}) }, uploaded)?.version.text;

const resolution = suite('Translator preference resolution (pure)');

resolution('given upload history, when a preference is resolved, then each policy picks the newest version it allows', () => {
  assert.is(pick('1.0.0', 'none'), '1.0.0');
  assert.is(pick('1.0.0', 'patch'), '1.0.5');
  assert.is(pick('1.0.0', 'minor'), '1.1.0', 'pre-releases are never picked by a policy');
  assert.is(pick('1.0.0', 'all'), '2.1.0');
  assert.is(pick('2.0.0', 'patch'), '2.0.0');
  assert.is(pick('1.1.0', 'patch'), '1.1.0');
});

resolution('when the wanted version is not uploaded, then none resolves nothing and the others never go below it', () => {
  assert.is(pick('1.0.1', 'none'), undefined);
  assert.is(pick('1.0.1', 'patch'), '1.0.5');
  assert.is(pick('3.0.0', 'all'), undefined);
  assert.is(pick('1.0.0', 'all', { name: 'other' }), undefined);
});

resolution('when a pre-release is named exactly, then it resolves', () => {
  assert.is(pick('1.2.0-beta.1', 'none'), '1.2.0-beta.1');
  assert.is(pick('1.2.0-beta.1', 'minor'), '1.2.0-beta.1', 'no newer release of 1.x than 1.2.0-beta.1');
});

resolution('when userId is given, then only versions that user uploaded are candidates', () => {
  assert.is(pick('1.0.0', 'all', { userId: OTHER_ID }), undefined);
  assert.is(pick('1.0.0', 'all', { userId: ADMIN_ID }), '2.1.0');
});

resolution('when a model name matches several versions, then the highest release wins', () => {
  const list = [candidate('1.0.0', { deviceModelName: 'm' }), candidate('1.4.0', { deviceModelName: 'm' }), candidate('2.0.0-rc.1', { deviceModelName: 'm' }), candidate('9.0.0', { deviceModelName: 'n' })];
  assert.is(resolveModel('m', list)?.version.text, '1.4.0');
  assert.is(resolveModel('x', list), undefined);
});

resolution.run();

/** A decoder that reports which version decoded; 2.x also reports its major (a data-model change). */
const versioned = (version: string) => {
  const major = Number(version.split('.')[0]);
  return {
    name: 'versioned-decoder',
    version,
    match: { deviceModelName: 'versioned-model' },
    spec: {
      temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
      decoderVersion: 'string',
      ...(major >= 2 ? { decoderMajor: { type: 'number', unit: '', quantity: 'versionNumber' } } : {}),
    },
    code: `function translate({ encodedData }) {
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
  return { result: { temperature: bytes.readInt16BE(0) / 100, decoderVersion: '${version}'${major >= 2 ? `, decoderMajor: ${major}` : ''} } };
}`,
  };
};

const ingest = suite<{ t: TestPlatform; devices: Record<UpgradePolicy | 'model' | 'both', string> }>('Translator preferences at ingest');

ingest.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  await givenTranslator(ctx.t, versioned('1.0.0'));
  const prefs = (upgradePolicy: UpgradePolicy) => ({ translatorPreferences: [{ name: 'versioned-decoder', version: '1.0.0', upgradePolicy }] });
  ctx.devices = {
    none: (await givenDevice(ctx.t, { name: 'none', ...prefs('none') }))._id,
    patch: (await givenDevice(ctx.t, { name: 'patch', ...prefs('patch') }))._id,
    minor: (await givenDevice(ctx.t, { name: 'minor', ...prefs('minor') }))._id,
    all: (await givenDevice(ctx.t, { name: 'all', ...prefs('all') }))._id,
    model: (await givenDevice(ctx.t, { name: 'model', deviceModelName: 'versioned-model' }))._id,
    both: (await givenDevice(ctx.t, { name: 'both', deviceModelName: 'versioned-model', ...prefs('none') }))._id,
  };
});
ingest.after(async (ctx) => {
  await ctx.t.stop();
});

/** Which version decodes each device's next uplink. */
async function decodedBy(t: TestPlatform, devices: Record<string, string>): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, id] of Object.entries(devices)) out[key] = (await uplink(t, id, climateHex(20, 0, 0))).decoderVersion;
  return out;
}

ingest('when only 1.0.0 is uploaded, then every device decodes with it', async ({ t, devices }) => {
  assert.equal(await decodedBy(t, devices), { none: '1.0.0', patch: '1.0.0', minor: '1.0.0', all: '1.0.0', model: '1.0.0', both: '1.0.0' });
});

ingest('when a patch is uploaded, then the next uplinks of patch, minor, all and model-matched devices use it', async ({ t, devices }) => {
  await givenTranslator(t, versioned('1.0.1'));
  assert.equal(await decodedBy(t, devices), { none: '1.0.0', patch: '1.0.1', minor: '1.0.1', all: '1.0.1', model: '1.0.1', both: '1.0.0' });
});

ingest('when a minor release is uploaded, then minor and all move on, patch stays on 1.0.x', async ({ t, devices }) => {
  await givenTranslator(t, versioned('1.1.0'));
  assert.equal(await decodedBy(t, devices), { none: '1.0.0', patch: '1.0.1', minor: '1.1.0', all: '1.1.0', model: '1.1.0', both: '1.0.0' });
});

ingest('when a major release is uploaded, then only all and model-matched devices move to it', async ({ t, devices }) => {
  await givenTranslator(t, versioned('2.0.0'));
  const by = await decodedBy(t, devices);
  assert.equal(by, { none: '1.0.0', patch: '1.0.1', minor: '1.1.0', all: '2.0.0', model: '2.0.0', both: '1.0.0' });
  assert.is((await t.call('GET', `/api/iotnodes/${devices.all}`)).body.decoderMajor, 2);
});

ingest('when a device’s preferences change, then its next uplink uses the new resolution', async ({ t, devices }) => {
  const put = await t.call('PUT', `/api/iotnodes/${devices.none}`, { body: { translatorPreferences: [{ name: 'versioned-decoder', version: '1.0.0', upgradePolicy: 'patch' }] } });
  assert.is(put.status, 200, put.text);
  assert.is((await uplink(t, devices.none, climateHex(1, 0, 0))).decoderVersion, '1.0.1');
});

ingest('when a preference names another uploader, then nothing resolves and the uplink is stored undecoded', async ({ t }) => {
  const other = await givenUser(t, 'pref-other');
  const device = await givenDevice(t, { name: 'foreign pref', translatorPreferences: [{ name: 'versioned-decoder', userId: other.id, version: '1.0.0', upgradePolicy: 'all' }] });
  const after = await uplink(t, device._id, climateHex(1, 0, 0));
  assert.is(after.decoderVersion, undefined);
  assert.equal(after.encodedData, { hexEncoded: climateHex(1, 0, 0), port: 1 });
});

ingest('when translatorPreferences are malformed, then the device write is refused with 422 naming the field', async ({ t, devices }) => {
  const cases: [unknown, RegExp][] = [
    [[{ name: 'versioned-decoder', version: '1.0.0', upgradePolicy: 'sometimes' }], /^ERR - translatorPreferences\.0\.upgradePolicy /],
    [[{ name: "versioned-decoder", upgradePolicy: "all" }], /^ERR - translatorPreferences\.0(\.version)? .*(version|required)/],
    [[{ name: 'versioned-decoder', version: 'latest', upgradePolicy: 'all' }], /^ERR - translatorPreferences\.0\.version /],
    [[{ name: 'Versioned', version: '1.0.0', upgradePolicy: 'all' }], /^ERR - translatorPreferences\.0\.name /],
    [[{ name: 'versioned-decoder', version: '1.0.0', upgradePolicy: 'all', colour: 'red' }], /^ERR - translatorPreferences\.0(\.colour)? /],
    [{ name: 'versioned-decoder' }, /^ERR - translatorPreferences /],
  ];
  for (const [translatorPreferences, message] of cases) {
    const put = await t.call('PUT', `/api/iotnodes/${devices.patch}`, { body: { translatorPreferences } });
    assert.is(put.status, 422, `${JSON.stringify(translatorPreferences)}: ${put.text}`);
    assert.match(put.text, message);
    const post = await t.call('POST', '/api/iotnodes', { body: { name: 'bad prefs', translatorPreferences } });
    assert.is(post.status, 422, post.text);
  }
});

ingest('when a device reports translatorPreferences itself, then they are ignored', async ({ t, devices }) => {
  const after = await uplink(t, devices.patch, climateHex(3, 0, 0), 1, { translatorPreferences: [{ name: 'versioned-decoder', version: '2.0.0', upgradePolicy: 'none' }] });
  assert.equal(after.translatorPreferences, [{ name: 'versioned-decoder', version: '1.0.0', upgradePolicy: 'patch' }]);
  assert.is((await uplink(t, devices.patch, climateHex(3, 0, 0))).decoderVersion, '1.0.1');
});

ingest.run();
