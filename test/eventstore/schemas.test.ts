/**
 * Event schema evolution: every appended event carries its type's schema
 * version, and events stored in a retired shape are upcast on read, so a
 * replay of them gives today's state.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createPostgresStore } from '../../domain/eventstore/postgres.js';
import { versioned } from '../../domain/eventstore/versioned.js';
import { EVENT_SCHEMAS, upcast, type EventSchemas } from '../../domain/eventstore/schemas.js';
import type { NewEvent, RecordedEvent } from '../../domain/shared/events.js';
import { rebuild } from '../../projections/rebuild.js';
import type { Database } from '../../projections/database.js';
import { startTestPlatform } from '../support/platform.js';
import { snapshotReadModels } from '../support/readmodels.js';
import { givenUser } from '../users/given.js';
import { climateHex, climateSensor, givenDevice, uplink } from '../translators/given.js';
import { projected } from '../ingest/support.js';

const recorded = (type: string, data: Record<string, unknown>, schemaVersion?: number): RecordedEvent => ({
  id: randomUUID(),
  type,
  data,
  metadata: { actor: 'system:test', correlationId: 'c', time: '2026-01-01T00:00:00.000Z', ...(schemaVersion === undefined ? {} : { schemaVersion }) },
  streamId: 's',
  revision: 0,
  position: { commit: 1n, prepare: 1n },
});

const unit = suite('upcasters');

unit('a claim stored before claims carried their rights is read with no grants, at version 2', () => {
  const old = recorded('DeviceClaimed', { id: 'd', userId: 'u', credentialsSetId: null, at: 't' });
  const now = upcast(old);
  assert.equal(now.data, { id: 'd', userId: 'u', credentialsSetId: null, at: 't', grants: [] });
  assert.is(now.metadata.schemaVersion, 2);
  assert.is(old.metadata.schemaVersion, undefined, 'the stored event is not changed');
});

unit('a translator version uploaded before field maps and examples is read with an empty map, reject, and no examples', () => {
  const now = upcast(recorded('TranslatorUploaded', { id: 'x', name: 'n' }));
  assert.equal(now.data, { id: 'x', name: 'n', fieldMap: {}, unmapped: 'reject', examples: [] });
  assert.is(now.metadata.schemaVersion, 2);
});

unit('an event at its current version, or of a type without versions, is read as stored', () => {
  const current = recorded('DeviceClaimed', { id: 'd', grants: [{ subjectType: 'user', subjectId: 'u', scope: ['read'] }] }, 2);
  assert.is(upcast(current), current);
  const plain = recorded('DashboardDeleted', { id: 'd' });
  assert.is(upcast(plain), plain);
});

unit('upcasters run one version at a time, and a missing step is an error rather than a guess', () => {
  const schemas: EventSchemas = {
    Renamed: { version: 3, upcast: { 1: (d) => ({ ...d, b: d.a }), 2: ({ a: _a, ...d }) => ({ ...d, c: `${d.b}!` }) } },
    Broken: { version: 2, upcast: {} },
  };
  assert.equal(upcast(recorded('Renamed', { a: 1 }), schemas).data, { b: 1, c: '1!' });
  assert.equal(upcast(recorded('Renamed', { b: 2 }, 2), schemas).data, { b: 2, c: '2!' });
  assert.throws(() => upcast(recorded('Broken', {}), schemas), /no upcaster for Broken from version 1/);
});

unit('every versioned type has an upcaster for each version below its current one', () => {
  for (const [type, schema] of Object.entries(EVENT_SCHEMAS)) {
    for (let v = 1; v < schema.version; v++) assert.type(schema.upcast[v], 'function', `${type} ${v} → ${v + 1}`);
  }
});

unit.run();

const replay = suite('events of retired shapes on replay');

replay('given a claim, a translator upload and a connector downlink stored in the shapes of earlier releases, when the read models follow them and are rebuilt, then they hold today\'s state', async () => {
  const t = await startTestPlatform();
  const pool = new pg.Pool({ connectionString: t.platform.deps.config.databaseUrl!, max: 2 });
  // The adapter itself, as an earlier release wrote: no schema version, no upcasting.
  const raw = createPostgresStore(pool);
  try {
    const claimer = await givenUser(t, 'old-claimer');
    const adminId = (await t.platform.deps.db.selectFrom('users').select('id').where('username', '=', 'admin').executeTakeFirstOrThrow()).id;
    const at = new Date().toISOString();
    const meta = { actor: claimer.id, correlationId: randomUUID(), time: at };
    const event = (type: string, data: Record<string, unknown>): NewEvent => ({ id: randomUUID(), type, data, metadata: meta });

    // A device a credentials set reported, claimed the way claims were stored before they carried their rights:
    // a `DeviceClaimed` without grants or username, the rights as `AccessGranted` on the device's access stream.
    const device = '6a1b2c3d4e5f60718293a4b5';
    await raw.append(`device-${device}`, [event('DeviceRegistered', { id: device, createdBy: adminId, doc: { name: 'old sensor', secret: 'old/topic' }, credentialsSetId: '6a1b2c3d4e5f60718293a4b6', at })], 'no_stream');
    await raw.append(`device-${device}`, [event('DeviceClaimed', { id: device, userId: claimer.id, credentialsSetId: '6a1b2c3d4e5f60718293a4b6', at })], 0);
    await raw.append(`access-${device}`, [event('AccessGranted', { resourceType: 'device', resourceId: device, subjectType: 'user', subjectId: claimer.id, scope: ['admin', 'write', 'read', 'peek'], at })], 'any');

    // A translator version uploaded before field maps, `unmapped` and examples existed.
    const translator = '6a1b2c3d4e5f60718293a4c1';
    const { spec, code } = climateSensor;
    await raw.append('translator-name-old-climate', [
      event('TranslatorUploaded', { id: translator, name: 'old-climate', version: '1.0.0', apiVersion: '1.0', description: 'old', match: { deviceModelName: 'old-model' }, parameters: {}, spec, code, createdBy: adminId, at }),
    ], 'no_stream');

    // A connector with a Generic downlink of the releases before commands had their own streams.
    const connector = '6a1b2c3d4e5f60718293a4d1';
    await raw.append(`connector-${connector}`, [
      event('ConnectorCreated', { id: connector, createdBy: adminId, doc: { name: 'old gateway', integration: 'GenericHttp' }, secrets: {}, at }),
      event('DownlinkQueued', { id: connector, topic: 'svc/push/v1/x/valve', message: '{"open":true}', at }),
    ], 'no_stream');
    await projected(t);

    // The claim: its rights and its log entry, as a claim stored today would give them.
    assert.is((await t.call('GET', `/api/iotnodes/${device}`, { token: claimer.token })).status, 200, 'the claimer reads the device');
    const rights = await t.call('GET', `/api/access-rights/resource/${device}`, { token: claimer.token });
    assert.is(rights.status, 200, rights.text);
    assert.ok(rights.body.some((r: { subjectId: string; scope: string[] }) => r.subjectId === claimer.id && r.scope.includes('admin')));
    const logs = await t.call('GET', `/api/logs?resourceId=${device}`, { token: claimer.token });
    assert.ok(logs.body.logs.some((e: { message: string }) => e.message === `Claimed by user ${claimer.id} (${claimer.id})`), JSON.stringify(logs.body));

    // The translator: defaults in place, and it decodes.
    const shown = await t.call('GET', `/api/translators/${translator}`);
    assert.is(shown.status, 200, shown.text);
    assert.equal([shown.body.fieldMap, shown.body.unmapped, shown.body.examples], [{}, 'reject', []]);
    const sensor = await givenDevice(t, { name: 'decoded by the old version', deviceModelName: 'old-model' });
    const after = await uplink(t, sensor._id, climateHex(21.5, 40, 3000));
    assert.is(after.temperature, 21.5, 'the upcast version decodes uplinks');

    // The connector: there, and its retired downlink applied by nothing and set aside by nothing.
    assert.is((await t.call('GET', `/api/connectors/${connector}`)).status, 200);
    assert.is((await t.call('GET', '/api/health', { token: null })).body.parkedEvents, 0);

    // Appends today carry their type's current version.
    const { rows } = await sql<{ type: string; v: string | null }>`SELECT type, metadata->>'schemaVersion' AS v FROM es.events WHERE stream_id = ${`device-${sensor._id}`}`.execute(t.platform.deps.db);
    assert.ok(rows.length > 0 && rows.every((r) => r.v === '1'), JSON.stringify(rows));
    const { rows: old } = await sql<{ v: string | null }>`SELECT metadata->>'schemaVersion' AS v FROM es.events WHERE stream_id = ${`device-${device}`}`.execute(t.platform.deps.db);
    assert.ok(old.every((r) => r.v === null), 'events of earlier releases are stored as they were');

    // A rebuild from the log gives the same read models.
    const live = await snapshotReadModels(t.platform.deps.db);
    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }) });
    try {
      await rebuild(versioned(createPostgresStore(pool)), db, pino({ level: 'silent' }));
      assert.equal(await snapshotReadModels(db), live);
    } finally {
      await db.destroy();
    }
  } finally {
    await t.stop().catch(() => {});
    await pool.end();
  }
});

replay.run();
