import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { givenUser } from '../users/given.js';
import { logged, ruleLog } from '../rules/given.js';
import { box, givenFence, givenMapper, type GivenUser } from './given.js';

/**
 * Geofence tracking writes an asset's id, name and position into the
 * tracker, so a fence tracks only what its owner (its creator) may read, and
 * only into a tracker the owner may write, checked at each report: another
 * tenant's fence, however large, learns nothing of a device it was not given.
 */
const tenants = suite<{ t: TestPlatform; alice: GivenUser; bob: GivenUser }>('geofence tracking follows the fence owner\'s rights');

tenants.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.alice = await givenMapper(ctx.t, 'alice');
  ctx.bob = await givenMapper(ctx.t, 'bob');
});
tenants.after(async (ctx) => {
  await ctx.t.stop();
});

const point = (lng: number, lat: number) => ({ type: 'Point', coordinates: [lng, lat] });

async function device(t: TestPlatform, owner: GivenUser, name: string): Promise<string> {
  const res = await t.call('POST', '/api/iotnodes', { token: owner.token, body: { name } });
  assert.is(res.status, 201, res.text);
  return res.body._id;
}

async function move(t: TestPlatform, owner: GivenUser, id: string, lng: number, lat: number): Promise<void> {
  const res = await t.call('PUT', `/api/iotnodes/${id}`, { token: owner.token, body: { lnglat: point(lng, lat) } });
  assert.is(res.status, 200, res.text);
}

async function share(t: TestPlatform, owner: GivenUser, resourceType: string, resourceId: string, subjectId: string, scope = ['read']): Promise<void> {
  const res = await t.call('POST', '/api/access-rights', { token: owner.token, body: { resourceType, resourceId, subjectType: 'user', subjectId, scope } });
  assert.ok(res.status < 300, res.text);
}

async function unshare(t: TestPlatform, owner: GivenUser, resourceType: string, resourceId: string, subjectId: string): Promise<void> {
  const res = await t.call('DELETE', '/api/access-rights', { token: owner.token, body: { resourceType, resourceId, subjectType: 'user', subjectId } });
  assert.ok(res.status < 300, res.text);
}

/** The tracker as its owner reads it, once `ready` holds. */
const trackerOnce = (t: TestPlatform, owner: GivenUser, id: string, ready: (d: Record<string, any>) => boolean, what: string) =>
  eventually(async () => {
    const res = await t.call('GET', `/api/iotnodes/${id}`, { token: owner.token });
    return res.status === 200 && ready(res.body) ? (res.body as Record<string, any>) : undefined;
  }, 10_000, what);

const listed = (tracker: Record<string, any>): string[] => (Array.isArray(tracker.assetList) ? tracker.assetList.map((a: { assetId: string }) => a.assetId) : []);

/** Everything stored about a device and its log, as text. */
async function storedText(t: TestPlatform, id: string): Promise<string> {
  const events = [...(await t.platform.deps.store.readStream(`device-${id}`)), ...(await t.platform.deps.store.readStream(`logs-${id}`))];
  return JSON.stringify(events.map((e) => e.data));
}

tenants('given Bob\'s tracker behind a fence covering the world, when Alice moves her own device, then nothing of it reaches Bob\'s tracker or its log', async ({ t, alice, bob }) => {
  const mine = await device(t, alice, 'alice secret van');
  const tracker = await device(t, bob, 'bob world tracker');
  await givenFence(t, box(-179, -89, 179, 89), { token: bob.token, ref: tracker });

  await move(t, alice, mine, 13.4, 52.5);
  // Bob's own device after hers: tracking handles positions in order, so once it is listed hers was handled.
  const own = await device(t, bob, 'bob bike');
  await move(t, bob, own, 2.35, 48.85);
  const seen = await trackerOnce(t, bob, tracker, (d) => listed(d).includes(own), 'Bob\'s own device on his tracker');

  assert.equal(listed(seen), [own]);
  assert.is(seen.assetUpdate.assetId, own);
  const text = await storedText(t, tracker);
  assert.not.ok(text.includes(mine), 'Alice\'s device id is nowhere in the tracker or its log');
  assert.not.ok(text.includes('alice secret van'), 'nor its name');
  assert.not.ok(text.includes('13.4'), 'nor its position');
});

tenants('given Alice shared her device with Bob and it entered his fence, when she revokes the right and it moves on, then his tracker records nothing more of it', async ({ t, alice, bob }) => {
  const shared = await device(t, alice, 'alice shared truck');
  const tracker = await device(t, bob, 'bob depot tracker');
  await givenFence(t, box(20, 40, 30, 50), { token: bob.token, ref: tracker });
  await share(t, alice, 'device', shared, bob.id);

  await move(t, alice, shared, 25, 45);
  const entered = await trackerOnce(t, bob, tracker, (d) => listed(d).includes(shared), 'the shared device entering, while Bob may read it');
  assert.is(entered.assetUpdate.assetName, 'alice shared truck');

  await unshare(t, alice, 'device', shared, bob.id);
  await move(t, alice, shared, 26.5, 46.5);
  await move(t, alice, shared, 61.25, 11.75);
  const own = await device(t, bob, 'bob van');
  await move(t, bob, own, 21, 41);
  const after = await trackerOnce(t, bob, tracker, (d) => d.assetUpdate?.assetId === own, 'Bob\'s own device entering after the revocation');

  const text = await storedText(t, tracker);
  assert.not.ok(text.includes('61.25') || text.includes('26.5'), 'no position of Alice\'s device after the revocation');
  assert.not.ok(JSON.stringify(after).includes('61.25'));
  const exits = (await t.platform.deps.store.readStream(`logs-${tracker}`)).filter((e) => (e.data as { message: string }).message.includes(`(${shared}) left`));
  assert.is(exits.length, 0, 'not even its leaving is recorded');
});

tenants('given Carol may read Bob\'s fence but not the asset crossing it, when the asset enters, then her geofence rule does not run and its log says why', async ({ t, alice, bob }) => {
  const roles = await t.call('POST', '/api/roles', { body: { name: 'ruler', permissions: { rule: ['GET', 'POST', 'PUT', 'DELETE'], geofence: ['GET'], device: ['GET'], log: ['GET'] } } });
  assert.is(roles.status, 201, roles.text);
  const carol = await givenUser(t, 'carol', { attributes: { roles: ['ruler'] } });
  const asset = await device(t, alice, 'alice courier');
  const tracker = await device(t, bob, 'bob gate tracker');
  const fence = await givenFence(t, box(100, 10, 110, 20), { token: bob.token, ref: tracker });
  await share(t, alice, 'device', asset, bob.id);
  await share(t, bob, 'geofence', fence._id, carol.id);
  const rule = await t.call('POST', '/api/rules-v2', {
    token: carol.token,
    body: {
      name: 'gate watch',
      definition: {
        nodes: [
          { id: 'enter', type: 'trigger', config: { resourceType: 'geofence', geofenceId: fence._id, event: 'enter' } },
          { id: 'note', type: 'action', config: { action: 'log', message: 'something entered' } },
        ],
        edges: [{ from: 'enter', to: 'note' }],
      },
    },
  });
  assert.is(rule.status, 201, rule.text);

  await move(t, alice, asset, 105, 15);
  await trackerOnce(t, bob, tracker, (d) => listed(d).includes(asset), 'Bob\'s tracker recording the entry (Bob may read the asset)');
  const refused = await logged(t, rule.body._id, /^Not run/, 10_000, carol.token);
  assert.is(refused.message, `Not run: the rule's owner cannot read iotnode ${asset}, the asset that crossed geofence ${fence._id}`);
  const runs = (await t.platform.deps.db.selectFrom('es.events' as any).select('stream_id' as any).where('type' as any, '=', 'RuleRunStarted').execute()) as unknown[];
  assert.is(runs.length, 0, 'no run was started');
  assert.not.ok((await ruleLog(t, rule.body._id, carol.token)).some((l) => l.message.includes('something entered')));
});

tenants('given Bob is disabled, when a device he was given moves into his fence, then his tracker does not change, while a fence of someone who may read the device tracks it', async ({ t, alice, bob }) => {
  const shared = await device(t, alice, 'alice tractor');
  const tracker = await device(t, bob, 'bob field tracker');
  await givenFence(t, box(-60, -30, -50, -20), { token: bob.token, ref: tracker });
  await share(t, alice, 'device', shared, bob.id);
  // Alice's own fence on the same field: it proves the move was handled.
  const hers = await device(t, alice, 'alice field tracker');
  await givenFence(t, box(-60, -30, -50, -20), { token: alice.token, ref: hers });

  const disabled = await t.call('PATCH', `/api/users/${bob.id}`, { body: { enabled: false } });
  assert.is(disabled.status, 200, disabled.text);
  await move(t, alice, shared, -55, -25);
  await trackerOnce(t, alice, hers, (d) => listed(d).includes(shared), 'Alice\'s own tracker recording the entry');

  const read = (await t.platform.deps.db.selectFrom('devices').select('doc').where('id', '=', tracker).executeTakeFirstOrThrow()).doc as Record<string, any>;
  assert.is(read.assetList, undefined, 'a disabled owner\'s fence tracks nothing');
  assert.not.ok((await storedText(t, tracker)).includes(shared));
});

tenants.run();
