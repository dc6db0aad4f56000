import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform } from '../support/platform.js';
import { projected } from '../ingest/support.js';
import { ChirpStackStandIn } from '../standins/chirpstack.js';

/**
 * A network server retries an uplink whose answer it did not get; when the
 * platform restarted in between, the retry still finds the uplink stored (by
 * its correlation id, in the store) and is answered without storing it again.
 */
const EUI = '70b3d57ed0052d31';
const TOKEN = 'restart-api-token';

const restart = suite('Webhook retries across a restart');

restart('given an uplink stored before a restart, when ChirpStack posts it again after it, then it is stored once', async () => {
  const ns = await new ChirpStackStandIn(TOKEN, new Set([EUI])).start();
  let t = await startTestPlatform();
  try {
    const connector = await t.call('POST', '/api/connectors', { body: { name: 'network', integration: 'ChirpStack', chirpstack: { url: ns.url, apiToken: TOKEN } } });
    assert.is(connector.status, 201, connector.text);
    const device = await t.call('POST', '/api/iotnodes', { body: { name: 'meter', connector: connector.body._id, devEui: EUI } });
    assert.is(device.status, 201, device.text);
    ns.integration = { url: `${t.baseUrl}/api/integrations/chirpstack/${connector.body._id}`, headers: { Authorization: `Bearer ${connector.body.webhookSecret}` } };
    const body = { deduplicationId: 'd2c5e3a0-6d1b-4a57-9f0e-5a8f6e1b2c3d', time: new Date().toISOString(), deviceInfo: { devEui: EUI }, fCnt: 7, fPort: 2, data: Buffer.from('0102', 'hex').toString('base64') };
    assert.is((await ns.post('up', body)).status, 200);

    const url = t.platform.deps.config.databaseUrl!;
    await t.stop();
    t = await startTestPlatform({ databaseUrl: url });
    ns.integration = { ...ns.integration, url: `${t.baseUrl}/api/integrations/chirpstack/${connector.body._id}` };
    const again = await ns.post('up', body);
    assert.is(again.status, 200, again.text);
    await projected(t);
    const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'DeviceReported' AND stream_id = ${`device-${device.body._id}`}`.execute(t.platform.deps.db);
    assert.is(rows[0]!.n, 1);
  } finally {
    await t.stop();
    await ns.stop();
  }
});

restart.run();
