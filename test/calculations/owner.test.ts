import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, deviceOf, eventually, givenProvider, publish } from '../ingest/support.js';
import { givenCalculation, givenCalculator, givenDevice, grant, lastValue, readings } from './given.js';

const ROOT = 'svc/generic/v2/owner';

/**
 * A calculation writes into a device with its owner's rights, so it runs only
 * while its owner could do the same through REST: an enabled user whose
 * roles allow PUT on `device`, besides the rights on its devices. An owner
 * disabled or given a role that may not change devices halts it, logged on
 * it, until that is no longer so.
 */
const owner = suite<{ t: TestPlatform; mqtt: MqttClient; source: string }>('calculations run only for an owner who may still act');

owner.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const p = await givenProvider(ctx.t, 'owner-provider', [`${ROOT}/meter`]);
  ctx.mqtt = await connectMqtt(ctx.t, p.username, p.password);
  await publish(ctx.mqtt, `${ROOT}/meter`, { hello: true });
  ctx.source = (await deviceOf(ctx.t, `${ROOT}/meter`))._id;
});
owner.after(async (ctx) => {
  await ctx.mqtt.endAsync();
  await ctx.t.stop();
});

/** The calculation's log entries, oldest first, from the read model. */
async function calculationLog(t: TestPlatform, id: string): Promise<{ type: string; message: string }[]> {
  return (await t.platform.deps.db.selectFrom('device_logs').select(['type', 'message']).where('resource_id', '=', id).orderBy('time').orderBy('id').execute()) as { type: string; message: string }[];
}

/** A calculator who may read the source, with a calculation copying a field of it into a device of their own. */
async function givenRunning(t: TestPlatform, source: string, username: string, field: string) {
  const user = await givenCalculator(t, username);
  await grant(t, 'device', source, user.id, ['read']);
  const destination = await givenDevice(t, `${username} results`, user.token);
  const calc = await givenCalculation(t, lastValue([[source, field]], [destination, `${field}Copy`], 'max'), user.token);
  return { user, destination, calc };
}

owner('given a running calculation, when an admin disables its owner, then the next report halts it and logs why, and it runs again once the owner is enabled', async ({ t, mqtt, source }) => {
  const { user, destination, calc } = await givenRunning(t, source, 'vera', 'flow');
  await publish(mqtt, `${ROOT}/meter`, { flow: 1 });
  await eventually(async () => (await readings(t, destination, 'flowCopy', user.token)).length === 1, 10_000, 'the first result');

  assert.is((await t.call('PATCH', `/api/users/${user.id}`, { body: { enabled: false } })).status, 200);
  await publish(mqtt, `${ROOT}/meter`, { flow: 2 });
  await eventually(async () => (await t.platform.deps.db.selectFrom('calculations').select('halted').where('id', '=', calc._id).executeTakeFirst())?.halted, 10_000, 'the calculation to halt');
  const halted = await t.platform.deps.db.selectFrom('calculations').select('halted').where('id', '=', calc._id).executeTakeFirstOrThrow();
  assert.is(halted.halted, 'its owner no longer exists or is disabled');
  await publish(mqtt, `${ROOT}/meter`, { flow: 3 });
  const log = await eventually(async () => ((await calculationLog(t, calc._id)).length ? calculationLog(t, calc._id) : undefined), 5000, 'the log entry');
  assert.equal(log.map((e) => [e.type, e.message]), [['error', 'The calculation stopped: its owner no longer exists or is disabled. It runs again once that is no longer so.']]);

  assert.is((await t.call('PATCH', `/api/users/${user.id}`, { body: { enabled: true } })).status, 200);
  await publish(mqtt, `${ROOT}/meter`, { flow: 4 });
  const rows = await eventually(async () => {
    const r = await readings(t, destination, 'flowCopy', user.token);
    return r.length === 2 ? r : undefined;
  }, 10_000, 'the result once enabled');
  assert.equal(rows.map((r) => r.value), [1, 4], 'nothing was written while its owner was disabled');
  const events = (await t.platform.deps.store.readStream(`calculation-${calc._id}`)).map((e) => e.type);
  assert.equal(events, ['CalculationCreated', 'CalculationHalted', 'CalculationResumed']);
});

owner('given a running calculation, when its owner is given a role that may not change devices, then the next report halts it and logs why', async ({ t, mqtt, source }) => {
  const { user, destination, calc } = await givenRunning(t, source, 'walt', 'level');
  await publish(mqtt, `${ROOT}/meter`, { level: 10 });
  await eventually(async () => (await readings(t, destination, 'levelCopy', user.token)).length === 1, 10_000, 'the first result');

  const downgraded = await t.call('PATCH', `/api/users/${user.id}`, { body: { attributes: { roles: ['viewerFull'] } } });
  assert.is(downgraded.status, 200, downgraded.text);
  await publish(mqtt, `${ROOT}/meter`, { level: 20 });
  await eventually(async () => (await t.platform.deps.db.selectFrom('calculations').select('halted').where('id', '=', calc._id).executeTakeFirst())?.halted, 10_000, 'the calculation to halt');
  const halted = await t.platform.deps.db.selectFrom('calculations').select('halted').where('id', '=', calc._id).executeTakeFirstOrThrow();
  assert.is(halted.halted, 'its owner has no role that may change devices (PUT on device)');
  const log = await eventually(async () => ((await calculationLog(t, calc._id)).length ? calculationLog(t, calc._id) : undefined), 5000, 'the log entry');
  assert.equal(log.map((e) => e.type), ['error']);
  assert.equal((await readings(t, destination, 'levelCopy', user.token)).map((r) => r.value), [10], 'nothing written for the downgraded owner');
});

owner.run();
