/**
 * A rebuild's corrections stay. The devices projection remembers the
 * documents it wrote, and writes a remembered device with an update that
 * holds while the row is at the remembered revision; a rebuilt row has the
 * same revision, so the runner must forget what it remembers once a swap
 * has put new tables under it.
 */
import mqtt from 'mqtt';
import { sql, type Kysely } from 'kysely';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startPlatform, type Platform } from '../../api/platform.js';
import type { Database } from '../../projections/database.js';
import { rebuild } from '../../projections/rebuild.js';
import { startTestPlatform } from '../support/platform.js';
import { givenProvider, publish } from '../ingest/support.js';

const TOPIC = 'svc/generic/v2/rebuild-memory/meter';
const silent = pino({ level: 'silent' });

/** Resolves once the platform's read models include every event stored so far. */
async function projected(platform: Platform): Promise<void> {
  const { rows } = await sql<{ c: string; p: string }>`SELECT transaction_id::text AS c, global_position::text AS p FROM es.events
    ORDER BY transaction_id DESC, global_position DESC LIMIT 1`.execute(platform.deps.db);
  await platform.deps.projections.waitFor({ commit: BigInt(rows[0]!.c), prepare: BigInt(rows[0]!.p) }, 10_000);
}

const row = async (db: Kysely<Database>) =>
  (await sql<{ revision: number; doc: Record<string, unknown> }>`SELECT revision, doc FROM devices WHERE secret = ${TOPIC}`.execute(db)).rows[0]!;

const test = suite('rebuild: the live projections forget what the swap replaced');

test('given a device row with a field no event set, remembered by the running platform, when the devices read model is rebuilt and the device reports again, then the field stays gone', async () => {
  const first = await startTestPlatform({ logLevel: 'silent' });
  const provider = await givenProvider(first, 'memory-set', [TOPIC]);
  const config = first.platform.deps.config;
  let client = await mqtt.connectAsync(`mqtt://127.0.0.1:${first.mqttPort}`, { username: provider.username, password: provider.password, reconnectPeriod: 0 });
  await publish(client, TOPIC, { temperature: 1 });
  await projected(first.platform);
  // Given what an earlier, faulty projection left in the row: a field no event ever set, at the row's revision.
  await sql`UPDATE devices SET doc = doc || '{"wrongField": "left by an earlier projection"}' WHERE secret = ${TOPIC}`.execute(first.platform.deps.db);
  await client.endAsync();
  await first.stop();

  // The platform starts again (nothing remembered) and its next report reads the row, wrong field and all, and remembers it.
  const platform = await startPlatform(config, silent);
  try {
    const db = platform.deps.db;
    client = await mqtt.connectAsync(`mqtt://127.0.0.1:${platform.mqttPort}`, { username: provider.username, password: provider.password, reconnectPeriod: 0 });
    await publish(client, TOPIC, { temperature: 2 });
    await projected(platform);
    assert.ok('wrongField' in (await row(db)).doc, 'the wrong field is still in the row before the rebuild');

    // When the devices read model is rebuilt beside the running platform,
    await rebuild(platform.deps.store, db, silent, { names: ['devices'] });
    const rebuilt = await row(db);
    assert.not.ok('wrongField' in rebuilt.doc, 'the rebuild took the wrong field out');

    // and the device reports again,
    await publish(client, TOPIC, { temperature: 3 });
    await projected(platform);

    // then the report is applied to the rebuilt row, and the wrong field stays gone.
    const after = await row(db);
    assert.is(after.doc.temperature, 3);
    assert.is(after.revision, rebuilt.revision + 1);
    assert.not.ok('wrongField' in after.doc, 'the remembered document was not written over the rebuilt row');
    await client.endAsync();
  } finally {
    await platform.stop();
  }
});

test.run();
