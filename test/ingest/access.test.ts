import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { connectMqtt, eventually, givenProvider, publish, type Provider } from './support.js';

const ROOT = 'svc/generic/v2/rights';

const rights = suite<{ t: TestPlatform; p: Provider; reader: GivenUser; other: GivenUser }>('Access rights on devices created by ingest');

rights.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  ctx.p = await givenProvider(t, 'rights', [`${ROOT}/a`, `${ROOT}/b`]);
  ctx.reader = await givenUser(t, 'set-reader', { attributes: { roles: ['viewerBasic'] } });
  ctx.other = await givenUser(t, 'bystander', { attributes: { roles: ['viewerBasic'] } });
});
rights.after(async (ctx) => {
  await ctx.t.stop();
});

rights('given a user with read on the credentials set, when a first message creates a device, then the grant is stored with the device and the user can read it', async ({ t, p, reader, other }) => {
  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'credentialsSet', resourceId: p.setId, subjectType: 'singleton', subjectId: reader.id, scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/a`, { temperature: 20 });
  await c.endAsync();

  // Right after the PUBACK, the store holds the registration and the grant, written in the same transaction.
  const { rows } = await sql<{ stream_id: string; type: string; tx: string; data: any; actor: string }>`
    SELECT stream_id, type, transaction_id::text AS tx, data, metadata->>'actor' AS actor FROM es.events
    WHERE type IN ('DeviceRegistered', 'AccessGranted') AND (data->>'id' IS NOT NULL AND data->'doc'->>'secret' = ${`${ROOT}/a`} OR data->>'subjectId' = ${reader.id})
    ORDER BY global_position`.execute(t.platform.deps.db);
  const registered = rows.find((r) => r.type === 'DeviceRegistered');
  assert.ok(registered, 'the device is registered');
  const deviceId = registered!.data.id as string;
  const granted = rows.find((r) => r.type === 'AccessGranted' && r.data.resourceId === deviceId);
  assert.ok(granted, `the reader's right on the device is stored once the message is acknowledged: ${JSON.stringify(rows)}`);
  assert.is(granted!.tx, registered!.tx, 'one transaction holds the device and the rights it inherits');
  assert.is(granted!.stream_id, `access-${deviceId}`);
  assert.equal(granted!.data.scope, ['read']);
  assert.is(granted!.actor, `credentials:${p.setId}`);

  const seen = await eventually(async () => {
    const res = await t.call('GET', `/api/iotnodes/${deviceId}`, { token: reader.token });
    return res.status === 200 ? res.body : undefined;
  }, 5000, 'the reader sees the device');
  assert.is(seen.temperature, 20);
  assert.is((await t.call('GET', `/api/iotnodes/${deviceId}`, { token: other.token })).status, 404);
});

rights('given a viewer granted read on one device, when the viewer lists devices, then that device is listed and no other', async ({ t, p, other }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/b`, { level: 3 });
  await c.endAsync();
  const b = await eventually(async () => t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', `${ROOT}/b`).executeTakeFirst(), 5000, 'device b');
  const mine = await t.call('POST', '/api/iotnodes', { body: { name: 'Shared pump' } });
  assert.is(mine.status, 201, mine.text);
  await t.call('POST', '/api/iotnodes', { body: { name: 'Private pump' } });
  assert.equal((await t.call('GET', '/api/iotnodes', { token: other.token })).body, [], 'nothing before the grant');

  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'device', resourceId: mine.body._id, subjectType: 'singleton', subjectId: other.id, scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  const list = await t.call('GET', '/api/iotnodes', { token: other.token });
  assert.is(list.status, 200, list.text);
  assert.equal(list.body.map((d: { _id: string }) => d._id), [mine.body._id]);
  assert.is(list.body[0].name, 'Shared pump');
  const admin = await t.call('GET', '/api/iotnodes');
  assert.ok(admin.body.length >= 4 && admin.body.some((d: { _id: string }) => d._id === b.id), 'the admin lists them all');
});

rights.run();
