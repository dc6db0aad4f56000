import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import mqtt from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually as until } from '../ingest/support.js';
import { box, givenFence } from './given.js';
import { refusing } from '../support/refusing.js';

/**
 * Enter and exit driven end to end: an asset publishes its position over
 * MQTT on its reserved topic; the tracker device linked to the fence gets its
 * tracking fields and a log entry.
 */
const tracking = suite<{ t: TestPlatform; client: mqtt.MqttClient; setId: string; trackerId: string; assetId: string }>('geofence tracking over MQTT');

const TOPIC = 'svc/generic/v2/forklift';
const position = (lng: number, lat: number) => JSON.stringify({ lnglat: { type: 'Point', coordinates: [lng, lat] } });

/** Reads the device until `ready` holds; tracking follows the position event asynchronously. */
async function eventually(t: TestPlatform, id: string, ready: (device: Record<string, any>) => boolean): Promise<Record<string, any>> {
  let device: Record<string, any> = {};
  for (let i = 0; i < 200; i++) {
    device = (await t.call('GET', `/api/iotnodes/${id}`)).body;
    if (ready(device)) return device;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.unreachable(`device ${id} never reached the expected state: ${JSON.stringify(device)}`);
  return device;
}

async function publish(client: mqtt.MqttClient, payload: string): Promise<void> {
  await client.publishAsync(TOPIC, payload, { qos: 1 });
}

tracking.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  const set = await t.call('POST', '/api/basic-credentials-sets', { body: { username: 'forklift-provider', password: 'provider-secret-1' } });
  assert.is(set.status, 201, set.text);
  ctx.setId = set.body._id;
  const topic = await t.call('POST', '/api/reserved-mqtt-topics', { body: { topic: TOPIC, basicCredentialsSetId: set.body._id } });
  assert.is(topic.status, 201, topic.text);
  const tracker = await t.call('POST', '/api/iotnodes', { body: { name: 'yard gate' } });
  assert.is(tracker.status, 201, tracker.text);
  ctx.trackerId = tracker.body._id;
  await givenFence(t, box(10, 50, 11, 51), { ref: ctx.trackerId });
  const port = t.platform.mqttPort;
  ctx.client = await mqtt.connectAsync(`mqtt://127.0.0.1:${port}`, { username: 'forklift-provider', password: 'provider-secret-1', reconnectPeriod: 0 });
  // The first publish, outside the fence, creates the asset device.
  await publish(ctx.client, position(0, 0));
  const list = await eventuallyList(t);
  ctx.assetId = list;
});
tracking.after(async (ctx) => {
  await ctx.client?.endAsync();
  await ctx.t.stop();
});

async function eventuallyList(t: TestPlatform): Promise<string> {
  for (let i = 0; i < 200; i++) {
    const res = await t.call('GET', `/api/iotnodes?filter[secret]=${encodeURIComponent(TOPIC)}`);
    if (res.status === 200 && res.body.length === 1) return res.body[0]._id;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the asset device was never created from its first MQTT message');
}

tracking('given an asset outside, when it publishes a position inside the fence, then the tracker records the entry', async ({ t, client, trackerId, assetId }) => {
  await publish(client, position(10.5, 50.5));
  const tracker = await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'inside');
  assert.is(tracker.assetUpdate.assetId, assetId);
  assert.is(tracker.assetUpdate.assetAccess, 'enter');
  assert.is(tracker.assetUpdate.assetName, `MQTT - ${TOPIC}`);
  assert.equal(tracker.assetUpdate.assetPosition, { type: 'Point', coordinates: [10.5, 50.5] });
  assert.is(tracker.assetUpdate.assetIsGeofenceTracker, false);
  assert.type(tracker.assetUpdate.assetTimestamp, 'string');
  assert.equal(tracker.assetList.map((a: { assetId: string }) => a.assetId), [assetId]);
  assert.is(tracker.assets, 1);
  assert.is(tracker.trackers, 0);
  assert.is(tracker.prevReportedAt, undefined);
});

tracking('given an asset inside, when it publishes another position inside, then the tracker does not change', async ({ t, client, trackerId }) => {
  const before = (await t.call('GET', `/api/iotnodes/${trackerId}`)).body;
  const events = (await t.platform.deps.store.readStream(`device-${trackerId}`)).length;
  await publish(client, position(10.6, 50.6));
  // A later crossing proves the inside report was handled before it.
  await publish(client, position(12, 50.5));
  const after = await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'outside');
  assert.is(after.prevReportedAt, before.assetUpdate.assetTimestamp);
  assert.is((await t.platform.deps.store.readStream(`device-${trackerId}`)).length, events + 1, 'only the exit changed the tracker');
});

tracking('given an asset inside, when it publishes a position outside, then the tracker records the exit and a log entry is written', async ({ t, client, trackerId, assetId }) => {
  await publish(client, position(10.5, 50.5));
  await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'inside');
  await publish(client, position(20, 20));
  const tracker = await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'outside' && d.assetUpdate.assetPosition?.coordinates?.[0] === 20);
  assert.is(tracker.assetUpdate.assetAccess, 'exit');
  assert.equal(tracker.assetList, []);
  assert.is(tracker.assets, 0);
  assert.type(tracker.prevReportedAt, 'string');
  // The log entry is appended just after the tracker's update, so the update can be read first.
  const logged = async () => (await t.platform.deps.store.readStream(`logs-${trackerId}`)).map((e) => (e.data as { message: string }).message);
  await until(async () => (await logged()).some((m) => m.includes(assetId) && m.includes('left')), 10_000, 'the exit log entry').catch(() => undefined);
  const messages = await logged();
  assert.ok(messages.some((m) => m.includes(assetId) && m.includes('entered')), messages.join('\n'));
  assert.ok(messages.some((m) => m.includes(assetId) && m.includes('left')), messages.join('\n'));
});

tracking('given the database refuses the log entry of a crossing once (a crash between the tracker\'s update and its entry), when the position is handled again, then the entry is written, once', async ({ t, client, trackerId, assetId }) => {
  const entries = async () => (await t.platform.deps.store.readStream(`logs-${trackerId}`)).filter((e) => (e.data as { message: string }).message.includes(`(${assetId}) entered`));
  const before = (await entries()).length;
  const tried = await refusing(t.platform.deps.db, 'es.events', `NEW.stream_id = 'logs-${trackerId}' AND NEW.data->>'message' LIKE '%entered%'`, async () => {
    await publish(client, position(20, 21));
    await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'outside');
    await publish(client, position(10.25, 50.25));
    await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'inside' && d.assetUpdate.assetPosition?.coordinates?.[0] === 10.25);
    await until(async () => (await entries()).length === before + 1, 10_000, 'the entry log entry written on the second try');
  });
  assert.ok(tried >= 2, 'the entry was refused once, then written');
  await new Promise((r) => setTimeout(r, 300));
  assert.is((await entries()).length, before + 1, 'written once');
  // Outside again, as the tests after expect.
  await publish(client, position(20, 20));
  await eventually(t, trackerId, (d) => d.assetUpdate?.assetState === 'outside');
});

tracking('when the tracker changes, then it is an ordinary device update event caused by the position report', async ({ t, trackerId }) => {
  const events = await t.platform.deps.store.readStream(`device-${trackerId}`);
  const updates = events.filter((e) => e.type === 'DeviceUpdated');
  assert.ok(updates.length >= 2);
  for (const e of updates) {
    assert.is(e.metadata.actor, 'system:geofence-tracking');
    assert.type(e.metadata.causationId, 'string');
  }
});

tracking('given an mqtt channel on the tracker, when an asset enters and leaves the fence, then a consumer gets each assetUpdate on the output topic', async ({ t, client, setId, trackerId, assetId }) => {
  const channel = await t.call('POST', '/api/channels', { body: { name: 'gate watcher', iotnode: trackerId, mqtt: { type: 'basicCredentialsSet', recipient: setId } } });
  assert.is(channel.status, 201, channel.text);
  const consumer = await mqtt.connectAsync(`mqtt://127.0.0.1:${t.mqttPort}`, { username: 'forklift-provider', password: 'provider-secret-1', reconnectPeriod: 0 });
  try {
    const messages: { topic: string; body: any }[] = [];
    consumer.on('message', (topic, payload) => messages.push({ topic, body: JSON.parse(payload.toString()) }));
    const output = `svc/output/v2/${setId}/iotnode/${trackerId}`;
    await consumer.subscribeAsync(output, { qos: 1 });
    const arrived = async (state: string) => {
      for (let i = 0; i < 200; i++) {
        const found = messages.find((m) => m.body.diff?.assetUpdate?.assetState === state);
        if (found) return found;
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.unreachable(`no output message with assetState ${state}: ${JSON.stringify(messages)}`);
      throw new Error('unreachable');
    };

    // The asset is outside (the tests before end with it at 20, 20).
    await publish(client, position(10.25, 50.75));
    const entered = await arrived('inside');
    assert.is(entered.topic, output);
    assert.is(entered.body.iotnode._id, trackerId);
    assert.is(entered.body.event.type, 'DeviceUpdated');
    assert.is(entered.body.event.actor, 'system:geofence-tracking');
    assert.is(entered.body.diff.assetUpdate.assetId, assetId);
    assert.is(entered.body.diff.assetUpdate.assetAccess, 'enter');
    assert.equal(entered.body.diff.assetUpdate.assetPosition, { type: 'Point', coordinates: [10.25, 50.75] });
    assert.equal(entered.body.diff.assetList.map((a: { assetId: string }) => a.assetId), [assetId]);
    assert.is(entered.body.diff.assets, 1);

    await publish(client, position(30, 30));
    const left = await arrived('outside');
    assert.is(left.body.diff.assetUpdate.assetAccess, 'exit');
    assert.equal(left.body.diff.assetList, []);
    assert.is(left.body.diff.assets, 0);
  } finally {
    await consumer.endAsync();
    await t.call('DELETE', `/api/channels/${channel.body._id}`);
  }
});

tracking.run();
