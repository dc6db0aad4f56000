/**
 * A call that runs into its deadline holds the whole platform for a second.
 * Besides the suspension per (translator, device), a translator's failures
 * count against the owner of the devices (and an upload's against its
 * uploader): one owner's many devices, or one user's uploads, cannot stall
 * the platform more than five times a minute.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { TimeoutBudget } from '../../sandbox/index.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { climateHex, givenDevice, givenTranslator, logsAtLeast, translator, uplink } from './given.js';

const unit = suite('the time-out budget');

unit('given a payer with four strikes within a minute, when a fifth comes, then its calls are refused until the oldest of the five is a minute old', () => {
  let now = 1_000_000;
  const budget = new TimeoutBudget(5, 60_000, () => now);
  for (let i = 0; i < 4; i++) {
    assert.is(budget.charge('a'), 0);
    now += 1_000;
  }
  assert.is(budget.blockedUntil('a'), 0);
  assert.is(budget.charge('a'), 1_000_000 + 60_000);
  assert.is(budget.blockedUntil('b'), 0, 'another payer is not held');
  now = 1_000_000 + 59_999;
  assert.ok(budget.blockedUntil('a') > 0);
  now = 1_000_000 + 60_000;
  assert.is(budget.blockedUntil('a'), 0, 'the oldest strike left the window: four remain');
  assert.ok(budget.charge('a') > 0, 'a fifth within the window holds it again');
});

unit('given more payers than it keeps, then it forgets the quiet ones first', () => {
  let now = 0;
  const budget = new TimeoutBudget(1, 60_000, () => now, 2);
  budget.charge('old');
  now = 61_000;
  budget.charge('a');
  budget.charge('b');
  assert.ok(budget.blockedUntil('a') > 0);
  assert.ok(budget.blockedUntil('b') > 0);
  assert.is(budget.blockedUntil('old'), 0);
});

unit.run();

/** Decodes a temperature, except on port 30, where it loops until its deadline. */
const loopsOn30 = `
function translate({ encodedData }) {
  if (encodedData.port === 30) { while (true) {} }
  return { result: { temperature: Buffer.from(encodedData.hexEncoded, 'hex').readInt16BE(0) / 100 } };
}
`;
const spec = { temperature: { type: 'number', unit: '°C', quantity: 'temperature' } };
const preferences = (name: string) => [{ name, version: '1.0.0', upgradePolicy: 'none' }];

const platform = suite<{ t: TestPlatform }>('the time-out budget through ingest and uploads');

platform.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  await givenTranslator(ctx.t, { name: 'loops-on-30', match: {}, spec, code: loopsOn30 });
  await givenTranslator(ctx.t, { name: 'acme-climate', match: {} });
});
platform.after(async (ctx) => {
  await ctx.t.stop();
});

platform('given an owner whose five devices each made a shared decoder loop once within a minute, then the decoder is suspended on every device of that owner, and decodes on another owner’s devices, as the owner’s other decoder does', async ({ t }) => {
  const owner = await givenUser(t, 'many-devices', { attributes: { roles: ['installer'] } });
  const other = await givenUser(t, 'bystander', { attributes: { roles: ['installer'] } });
  const devices: string[] = [];
  for (let i = 0; i < 6; i++) devices.push((await givenDevice(t, { name: `looping ${i}`, translatorPreferences: preferences('loops-on-30') }, owner.token))._id);
  for (const id of devices.slice(0, 5)) await uplink(t, id, '0000', 30, {}, owner.token);

  const calls = t.platform.translation.calls;
  const sixth = await uplink(t, devices[5]!, climateHex(21, 0, 0), 1, {}, owner.token);
  assert.is(sixth.temperature, undefined, 'stored undecoded');
  assert.is(t.platform.translation.calls, calls, 'the decoder is not run');
  const [entry] = await logsAtLeast(t, devices[5]!, 1, owner.token);
  assert.match(entry!.message, /^Translator loops-on-30 1\.0\.0 failed \(suspended\): suspended for every iotnode of this owner until \S+ after 5 time-outs, or other failures that cost a new sandbox context, on their uplinks and downlinks within 60 s; the uplink is stored undecoded$/);

  const theirs = (await givenDevice(t, { name: 'same decoder, other owner', translatorPreferences: preferences('loops-on-30') }, other.token))._id;
  assert.is((await uplink(t, theirs, climateHex(22, 0, 0), 1, {}, other.token)).temperature, 22);
  const ownOther = (await givenDevice(t, { name: 'other decoder, same owner', translatorPreferences: preferences('acme-climate') }, owner.token))._id;
  assert.is((await uplink(t, ownOther, climateHex(23, 0, 0), 1, {}, owner.token)).temperature, 23);
});

platform('given a user whose upload’s examples run into their deadline, then after five the rest are not run, and the user’s next upload is refused with 429 until the budget refills; another user uploads as before', async ({ t }) => {
  const uploader = await givenUser(t, 'second-admin', { attributes: { roles: ['admin'] } });
  const example = { description: 'loops', input: { hexEncoded: '0000', port: 30 }, output: { temperature: 0 } };
  const body = translator({ name: 'loops-at-upload', match: {}, spec, code: loopsOn30, examples: Array.from({ length: 7 }, () => example) });
  const first = await t.call('POST', '/api/translators', { body, token: uploader.token });
  assert.is(first.status, 422, first.text);
  const problems = (first.body as { errors: { field: string; problem: string }[] }).errors;
  assert.equal(problems.map((p) => p.field), ['examples[0]', 'examples[1]', 'examples[2]', 'examples[3]', 'examples[4]', 'examples[5]', 'examples[6]']);
  assert.ok(problems.slice(0, 5).every((p) => p.problem.includes('(timeout)')), problems.map((p) => p.problem).join('\n'));
  assert.ok(problems.slice(5).every((p) => p.problem.includes('not run: the translators of this user ran into their deadline')), problems.map((p) => p.problem).join('\n'));

  const second = await t.call('POST', '/api/translators', { body: translator({ name: 'harmless', match: {}, spec, code: loopsOn30 }), token: uploader.token });
  assert.is(second.status, 429, second.text);
  assert.match(second.text, /^ERR - too many translator time-outs: your translators ran into their deadline, or cost a sandbox context, 5 times within 60 s; try again in \d+ s$/);
  assert.ok(Number(second.headers.get('retry-after')) >= 1);

  const other = await t.call('POST', '/api/translators', { body: translator({ name: 'harmless', match: {}, spec, code: loopsOn30 }) });
  assert.is(other.status, 201, other.text);
});

platform.run();
