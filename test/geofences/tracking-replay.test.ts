/**
 * Geofence tracking handles position events at least once: after a crash, a
 * batch that failed, or a read-model wait that timed out, the same batch is
 * handled again. Each report is decided as of itself, so handling it again
 * changes nothing: a report that decided nothing the first time must not
 * decide a crossing against the tracker as a later report left it.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { box, givenFence } from './given.js';

const replay = suite('geofence tracking: a batch handled again');

const point = (lng: number, lat: number) => ({ type: 'Point', coordinates: [lng, lat] });

/** The tracker's crossings, in order, as tracking wrote them. */
async function crossings(t: TestPlatform, trackerId: string): Promise<string[]> {
  const events = await t.platform.deps.store.readStream(`device-${trackerId}`);
  return events
    .filter((e) => e.type === 'DeviceUpdated' && e.metadata.actor === 'system:geofence-tracking')
    .map((e) => (e.data as { set: { assetUpdate: { assetAccess: string } } }).set.assetUpdate.assetAccess);
}

/** The tracker's log entries of crossings, oldest first. */
async function entries(t: TestPlatform, trackerId: string): Promise<string[]> {
  return (await t.platform.deps.store.readStream(`logs-${trackerId}`)).map((e) => (e.data as { message: string }).message);
}

/** Whether the subscriber's stored checkpoint is at or past the event. */
async function handled(db: Kysely<any>, subscriber: string, eventId: string): Promise<boolean> {
  const { rows } = await sql<{ done: boolean }>`
    SELECT (c.commit_position, c.prepare_position) >= (e.transaction_id::text::numeric, e.global_position) AS done
    FROM es.checkpoints c, es.events e WHERE c.name = ${subscriber} AND e.event_id = ${eventId}::uuid`.execute(db);
  return rows[0]?.done === true;
}

replay('given an asset that entered, reported inside again, then left, when the reactor handles those reports again (a crash before its checkpoint), then the tracker still lists nothing and no crossing is added', async () => {
  let t = await startTestPlatform();
  try {
    // Given: a tracker with a fence, and an asset that enters, stays inside, and leaves.
    const tracker = (await t.call('POST', '/api/iotnodes', { body: { name: 'gate' } })).body._id as string;
    const asset = (await t.call('POST', '/api/iotnodes', { body: { name: 'forklift' } })).body._id as string;
    await givenFence(t, box(0, 0, 10, 10), { ref: tracker });
    const move = async (lng: number, lat: number) => {
      const res = await t.call('PUT', `/api/iotnodes/${asset}`, { body: { lnglat: point(lng, lat) } });
      assert.is(res.status, 200, res.text);
    };
    const listed = async () => ((await t.call('GET', `/api/iotnodes/${tracker}`)).body.assetList ?? []).map((a: { assetId: string }) => a.assetId);
    await move(5, 5);
    await eventually(async () => (await listed()).includes(asset), 10_000, 'the asset to enter');
    await move(6, 6);
    await move(20, 20);
    const moves = (await t.platform.deps.store.readStream(`device-${asset}`)).filter((e) => e.type === 'DeviceUpdated');
    const [inside, exit] = moves.slice(-2).map((e) => e.id);
    await eventually(async () => handled(t.platform.deps.db, 'geofence-tracking', exit!), 10_000, 'the exit to be handled');
    assert.equal(await listed(), []);
    assert.equal(await crossings(t, tracker), ['enter', 'exit']);
    const logged = await entries(t, tracker);
    assert.is(logged.length, 2, logged.join('\n'));

    // The state a crash before the checkpoint of the last batch leaves: the reactor's checkpoint before the report inside.
    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    try {
      await sql`UPDATE es.checkpoints c SET commit_position = p.tx, prepare_position = p.gp
        FROM (SELECT transaction_id::text::numeric AS tx, global_position AS gp FROM es.events
              WHERE (transaction_id, global_position) < (SELECT transaction_id, global_position FROM es.events WHERE event_id = ${inside}::uuid)
              ORDER BY transaction_id DESC, global_position DESC LIMIT 1) p
        WHERE c.name = 'geofence-tracking'`.execute(db);
      assert.is(await handled(db, 'geofence-tracking', inside!), false);
    } finally {
      await db.destroy();
    }

    // When the platform starts again and the reactor handles the report inside and the exit again.
    t = await startTestPlatform({ databaseUrl: url });
    await eventually(async () => handled(t.platform.deps.db, 'geofence-tracking', exit!), 10_000, 'the reports to be handled again');
    await t.platform.deps.projections.waitFor((await t.platform.deps.store.readStream(`device-${tracker}`)).at(-1)!.position, 10_000);

    // Then: the tracker is as before, outside, with the same two crossings and log entries.
    assert.equal(await listed(), [], 'the asset is outside the fence');
    assert.equal(await crossings(t, tracker), ['enter', 'exit'], 'no crossing was decided again');
    assert.equal(await entries(t, tracker), logged);
  } finally {
    await t.stop();
  }
});

replay.run();
