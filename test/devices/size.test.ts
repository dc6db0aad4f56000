/**
 * A device's document is bounded (`DOC_LIMITS`): a report that would take it
 * past 1,000 fields or 1 MiB of JSON is left out of the document and its
 * history, whatever brought it; a REST write that would is answered 422.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { deviceDecider, deviceStream, reported, type DeviceDoc, type DeviceEvent } from '../../domain/devices/device.js';
import { DOC_LIMITS, sizeOf } from '../../domain/devices/size.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { toNewEvent } from '../../domain/shared/decider.js';
import { devicesProjection } from '../../projections/devices.js';
import { logsProjection } from '../../projections/logs.js';
import { allProjections } from '../../projections/index.js';
import { ProjectionRunner } from '../../projections/runner.js';
import { pino } from 'pino';
import { deciderSpec } from '../support/decider.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { connectMqtt, deviceOf, givenProvider, projected, publish } from '../ingest/support.js';

const AT = '2024-05-01T10:00:00.000Z';
const LATER = '2024-05-01T10:05:00.000Z';

/** A document of `n` fields `f0` … `f{n-1}`, each a small number. */
const fieldsDoc = (n: number, prefix = 'f'): DeviceDoc => Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, i]));

const registered = (doc: DeviceDoc): DeviceEvent => ({ type: 'DeviceRegistered', data: { id: 'd1', createdBy: 'u1', doc, at: AT } });

const pure = suite('a device document is bounded: the fold');

pure('given a document of 990 fields, when a report brings 20 new ones, then the document stays as it was, reportedAt included', () => {
  const doc = fieldsDoc(990);
  const out = reported(doc, { path: [], payload: fieldsDoc(20, 'g'), reportedAt: LATER });
  assert.is(out.refused, 'fields');
  assert.is(out.doc, doc);
});

pure('given a document of 990 fields, when a report brings 5 new ones and changes 100, then it is applied whole', () => {
  const doc = fieldsDoc(990);
  const payload = { ...fieldsDoc(5, 'g'), ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`f${i}`, -i])) };
  const out = reported(doc, { path: [], payload, reportedAt: LATER });
  assert.is(out.refused, null);
  assert.is(out.doc.g4, 4);
  assert.is(out.doc.f99, -99);
  assert.is(out.doc.reportedAt, LATER);
});

pure('given a document near 1 MiB, when a report on a sub-topic adds a 100 KB text under a nested field, then it is refused for its size', () => {
  const doc: DeviceDoc = { blob: { a: 'x'.repeat(500_000), b: 'y'.repeat(480_000) } };
  const out = reported(doc, { path: ['blob', 'c'], payload: { text: 'z'.repeat(100_000) }, reportedAt: LATER });
  assert.is(out.refused, 'bytes');
  assert.is(out.doc, doc);
  // Replacing a value by one of the same size fits.
  const same = reported(doc, { path: ['blob'], payload: { a: 'q'.repeat(500_000), b: 'y'.repeat(480_000) }, reportedAt: LATER });
  assert.is(same.refused, null);
});

pure('given a document already past the limit (stored before it existed), when a report changes a field without growing it, then it is applied', () => {
  const doc = fieldsDoc(1500);
  assert.is(reported(doc, { path: [], payload: { f3: 99 }, reportedAt: LATER }).refused, null);
  assert.is(reported(doc, { path: [], payload: { g: 1 }, reportedAt: LATER }).refused, 'fields');
});

// Nested values keep the size measured the first time (documents share them from event to event); it must stay the size measured afresh.
const json = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.boolean(), fc.constant(null), fc.string(), tie('object'), fc.array(tie('value'), { maxLength: 4 })),
  object: fc.dictionary(fc.string({ minLength: 1, maxLength: 6 }), tie('value'), { maxKeys: 5 }),
}));

pure('the size of a document folded from reports, measured with the sizes its nested values kept, equals its size measured afresh', () => {
  fc.assert(
    fc.property(json.object, fc.array(fc.tuple(fc.array(fc.string({ minLength: 1, maxLength: 3 }), { maxLength: 2 }), json.object), { maxLength: 6 }), (start, reports) => {
      let doc = start as DeviceDoc;
      for (const [path, payload] of reports) {
        doc = reported(doc, { path, payload: payload as DeviceDoc, reportedAt: LATER }).doc;
        assert.equal(sizeOf(doc), sizeOf(structuredClone(doc)));
      }
    }),
    { seed: 20261129, numRuns: 300 },
  );
});

pure.run();

const decide = suite('a device document is bounded: the decider');

decide('when a device is registered with more than 1,000 fields, then 422 names the limit', () => {
  deciderSpec(deviceDecider)
    .given([])
    .when({ type: 'RegisterDevice', id: 'd1', createdBy: 'u1', fields: { name: 'Big', ...fieldsDoc(1000) }, at: AT })
    .thenThrows(ValidationError, 'ERR - iotnode would hold more than 1000 fields');
});

decide('given a device of 600 KB, when an update adds 500 KB more, then 422; an update that removes a field is accepted', () => {
  const given = deciderSpec(deviceDecider).given([registered({ name: 'Big', a: 'x'.repeat(600_000) })]);
  given.when({ type: 'UpdateDevice', id: 'd1', fields: { b: 'y'.repeat(500_000) }, at: LATER }).thenThrows(ValidationError, `ERR - iotnode would be larger than ${DOC_LIMITS.bytes} bytes of JSON`);
  given.when({ type: 'UpdateDevice', id: 'd1', fields: { b: 'y'.repeat(100_000) }, at: LATER }).then([{ type: 'DeviceUpdated', data: { id: 'd1', set: { b: 'y'.repeat(100_000) }, unset: [], at: LATER } }]);
});

decide.run();

const platform = suite<{ t: TestPlatform }>('a device document is bounded: through MQTT and REST');

platform.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
platform.after(async (ctx) => {
  await ctx.t.stop();
});

platform('given a tenant whose device publishes 100 KB texts under ever new sub-topics, then its document stops below 1 MiB, the refused reports keep no history, one entry in its log says why, and another tenant is served as before', async ({ t }) => {
  const mallory = await givenUser(t, 'mallory', { attributes: { roles: ['installer'] } });
  const provider = await givenProvider(t, 'mal', ['svc/generic/v2/mal/d1'], mallory.token);
  const client = await connectMqtt(t, provider.username, provider.password);
  try {
    await publish(client, 'svc/generic/v2/mal/d1', { t: 0 });
    // When: 14 texts of 100 KB, 1.4 MB in all.
    for (let i = 0; i < 14; i++) await publish(client, `svc/generic/v2/mal/d1/f${i}`, { text: String(i % 10).repeat(100_000) });
    await publish(client, 'svc/generic/v2/mal/d1', { t: 1 });
    await projected(t);

    const device = await deviceOf(t, 'svc/generic/v2/mal/d1', mallory.token);
    const stored = Object.keys(device).filter((k) => /^f\d+$/.test(k));
    // Then: the first ten texts fit (about 1,000,000 bytes), the rest were left out, and later small reports still apply.
    assert.equal(stored.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1))), Array.from({ length: 10 }, (_, i) => `f${i}`));
    assert.is(device.t, 1);
    assert.ok(JSON.stringify(device).length <= DOC_LIMITS.bytes);
    const { body: fields } = await t.call('GET', `/api/iotnodes/${device._id}/stats/fields`, { token: mallory.token });
    assert.not.ok((fields as string[]).includes('f12.text'), 'a refused report keeps no history');
    assert.ok((fields as string[]).includes('f3.text'));
    // The four refusals came within a minute: one entry in the device's log says why.
    const { body: log } = await t.call('GET', `/api/logs?resourceId=${device._id}`, { token: mallory.token });
    const refusals = (log.logs as { message: string; type: string }[]).filter((l) => l.message.includes('left out'));
    assert.equal(refusals.map((l) => [l.type, l.message]), [
      ['warning', 'Report on svc/generic/v2/mal/d1/f10 left out: the iotnode would be larger than 1048576 bytes of JSON (at most 1000 fields and 1048576 bytes of JSON); reports left out in the next minute are not logged'],
    ]);

    // And another tenant: a REST write answered at once, read back.
    const victor = await givenUser(t, 'victor', { attributes: { roles: ['installer'] } });
    const created = await t.call('POST', '/api/iotnodes', { token: victor.token, body: { name: 'Thermo' } });
    assert.is(created.status, 201);
  } finally {
    await client.endAsync();
  }
});

platform('when a REST update would take a device past 1,000 fields, then 422 names the limit and nothing is stored', async ({ t }) => {
  const created = await t.call('POST', '/api/iotnodes', { body: { name: 'Wide', ...fieldsDoc(900) } });
  assert.is(created.status, 201);
  const id = created.body._id as string;
  const before = await t.platform.deps.store.readStream(deviceStream(id));
  const refused = await t.call('PUT', `/api/iotnodes/${id}`, { body: fieldsDoc(200, 'g') });
  assert.is(refused.status, 422);
  assert.is(refused.text, 'ERR - iotnode would hold more than 1000 fields');
  assert.is((await t.platform.deps.store.readStream(deviceStream(id))).length, before.length);
  const { body } = await t.call('GET', `/api/iotnodes/${id}`);
  assert.is(body.g0, undefined);
});

platform('given a batch with a report the document refuses, when the devices projection applies it a second time, then nothing changes', async ({ t }) => {
  const id = (await t.call('POST', '/api/iotnodes', { body: { name: 'Twice', ...fieldsDoc(990) } })).body._id as string;
  const events: DeviceEvent[] = [
    { type: 'DeviceReported', data: { id, topic: 'svc/x', path: [], payload: fieldsDoc(10, 'g'), reportedAt: LATER } },
    { type: 'DeviceReported', data: { id, topic: 'svc/x', path: [], payload: { f1: 'one' }, reportedAt: LATER } },
  ];
  const result = await t.platform.deps.store.append(deviceStream(id), events.map((e) => toNewEvent(e, { actor: 'credentials:x', correlationId: randomUUID(), now: LATER })), 'any');
  await t.platform.deps.projections.waitFor(result.position, 5000);
  const db = t.platform.deps.db;
  const once = await snapshotReadModels(db);
  const row = await db.selectFrom('devices').select('doc').where('id', '=', id).executeTakeFirstOrThrow();
  assert.is((row.doc as DeviceDoc).f1, 'one');
  assert.is((row.doc as DeviceDoc).g0, undefined);

  const logged = await db.selectFrom('device_logs').select('message').where('resource_id', '=', id).execute();
  assert.equal(logged.map((l) => l.message), ['Report on svc/x left out: the iotnode would hold more than 1000 fields (at most 1000 fields and 1048576 bytes of JSON); reports left out in the next minute are not logged']);

  const batch = await t.platform.deps.store.readStream(deviceStream(id));
  await db.transaction().execute(async (tx) => {
    await devicesProjection().apply(tx, batch);
    await logsProjection.apply(tx, batch);
  });
  assert.equal(await snapshotReadModels(db), once);
  const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM device_history WHERE device_id = ${id} AND fields ? 'g0'`.execute(db);
  assert.is(rows[0]!.n, 0);
});

platform('given the reports left out above, when the read models are emptied and rebuilt from the log, then they equal the live ones', async ({ t }) => {
  const { db, store, projections } = t.platform.deps;
  await projected(t);
  const live = await snapshotReadModels(db);
  assert.ok(live.device_refusals!.length >= 2, 'the suite left reports out');
  await projections.stop();
  try {
    const rebuilt = new ProjectionRunner(store, db, allProjections(), pino({ level: 'silent' }), 'size-rebuild');
    await rebuilt.reset();
    await rebuilt.catchUp();
    assert.equal(await snapshotReadModels(db), live);
  } finally {
    await projections.start();
  }
});

platform.run();
