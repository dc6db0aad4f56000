import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { connectMqtt, eventually, givenProvider, publish, type Provider } from '../ingest/support.js';
import { climateHex, givenDevice, givenTranslator, uplink } from '../translators/given.js';
import { parseMetrics, scrape, type Scrape } from '../support/metrics.js';

const TOKEN = 'metrics-token-0123456789abcdef';
const ROOT = 'svc/generic/v2/metrics';

const metrics = suite<{ t: TestPlatform; p: Provider; consumer: Provider }>('GET /metrics: Prometheus metrics behind METRICS_TOKEN');

metrics.before(async (ctx) => {
  ctx.t = await startTestPlatform({ metricsToken: TOKEN });
  ctx.p = await givenProvider(ctx.t, 'metered', [`${ROOT}/a`, `${ROOT}/b`]);
  ctx.consumer = await givenProvider(ctx.t, 'metered-consumer', []);
});
metrics.after(async (ctx) => {
  await ctx.t.stop();
});

const read = (t: TestPlatform) => scrape(t.baseUrl, TOKEN);

metrics('when /metrics is asked for without a token, with a wrong one or with a user’s access token, then 401 and no metric', async ({ t }) => {
  for (const authorization of [undefined, 'Bearer wrong-token-0123456789abcdef', `Bearer ${TOKEN}x`, `Bearer ${t.adminToken}`, TOKEN, `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}`]) {
    const res = await fetch(`${t.baseUrl}/metrics`, { headers: authorization ? { authorization } : {} });
    const text = await res.text();
    assert.is(res.status, 401, String(authorization));
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/);
    assert.not.match(text, /platform_|process_/);
  }
});

metrics('when /metrics is asked for with the token, then it answers the Prometheus text format with process metrics', async ({ t }) => {
  const res = await fetch(`${t.baseUrl}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.is(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const m = parseMetrics(await res.text());
  assert.ok(m.value('process_cpu_user_seconds_total')! > 0);
  assert.ok(m.value('process_resident_memory_bytes')! > 0);
  assert.ok(m.value('nodejs_heap_size_used_bytes')! > 0);
  assert.ok(m.has('nodejs_eventloop_lag_p99_seconds'));
});

metrics('given REST traffic, then request durations count by route template and status, never by raw path', async ({ t }) => {
  const before = await read(t);
  const missing = 'abcdefabcdefabcdefabcdef';
  for (let i = 0; i < 3; i++) assert.is((await t.call('GET', `/api/iotnodes/${missing}`)).status, 404);
  assert.is((await t.call('GET', '/api/iotnodes')).status, 200);
  assert.is((await t.call('GET', '/api/iotnodes', { token: null })).status, 401);
  assert.is((await t.call('GET', '/api/no-such-thing')).status, 404);
  const after = await read(t);
  const count = (m: Scrape, labels: Record<string, string>) => m.value('platform_http_request_duration_seconds_count', labels) ?? 0;
  assert.is(count(after, { method: 'GET', route: '/api/iotnodes/{id}', status: '404' }) - count(before, { method: 'GET', route: '/api/iotnodes/{id}', status: '404' }), 3);
  assert.is(count(after, { method: 'GET', route: '/api/iotnodes', status: '200' }) - count(before, { method: 'GET', route: '/api/iotnodes', status: '200' }), 1);
  assert.is(count(after, { method: 'GET', route: '/api/iotnodes', status: '401' }) - count(before, { method: 'GET', route: '/api/iotnodes', status: '401' }), 1);
  assert.ok(count(after, { method: 'GET', route: 'unmatched', status: '404' }) >= 1);
  assert.ok(count(after, { method: 'GET', route: '/metrics', status: '200' }) >= 1, 'scrapes are requests too');
  const sum = after.value('platform_http_request_duration_seconds_sum', { method: 'GET', route: '/api/iotnodes/{id}', status: '404' })!;
  assert.ok(sum > 0 && sum < 30, `a plausible duration sum: ${sum}`);
  assert.not.ok(after.text.includes(missing), 'a raw id never becomes a label value');
  assert.not.ok(after.text.includes('no-such-thing'));
});

metrics('given webhook calls, taken in directly or answered by the full pipeline, then each counts once under the webhook\'s template', async ({ t }) => {
  const connector = await t.call('POST', '/api/connectors', { body: { name: 'metered network', integration: 'ChirpStack', chirpstack: { url: 'http://127.0.0.1:9', apiToken: 'unused' } } });
  assert.is(connector.status, 201, connector.text);
  const hook = `/api/integrations/chirpstack/${connector.body._id}`;
  const call = (path: string, raw: string, secret = connector.body.webhookSecret as string) => t.call('POST', path, { token: secret, raw });
  const event = JSON.stringify({ deviceInfo: { devEui: '70b3d57ed0059999' }, fPort: 1, data: 'AQID' });
  const before = await read(t);
  assert.is((await call(`${hook}?event=integration`, event)).status, 200, 'taken directly');
  assert.is((await call(`${hook}/?event=integration`, event)).status, 200, 'the full pipeline');
  assert.is((await call(`${hook}?event=up`, event, 'wrong')).status, 401, 'taken directly, refused by the webhook');
  assert.is((await call(`${hook}?event=up`, '{"deviceInfo":')).status, 422, 'taken directly, a body that does not parse');
  assert.is((await call(`${hook}?event=up`, '[]')).status, 422, 'taken directly, handed on to the validator');
  assert.is((await call(`${hook}?event=up&debug=1`, event)).status, 422, 'left to the full pipeline');
  const after = await read(t);
  const delta = (status: string) => {
    const labels = { method: 'POST', route: '/api/integrations/{integration}/{connectorId}', status };
    return (after.value('platform_http_request_duration_seconds_count', labels) ?? 0) - (before.value('platform_http_request_duration_seconds_count', labels) ?? 0);
  };
  assert.equal([delta('200'), delta('401'), delta('422')], [2, 1, 3]);
});

metrics('given MQTT publishes and an output consumer, then connections, messages in and out, ingest batches and appends move', async ({ t, p, consumer }) => {
  const c = await connectMqtt(t, p.username, p.password);
  await publish(c, `${ROOT}/a`, { n: 0 });
  const device = await eventually(async () => (await t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', `${ROOT}/a`).executeTakeFirst())?.id);
  const channel = await t.call('POST', '/api/channels', { body: { iotnode: device, mqtt: { type: 'basicCredentialsSet', recipient: consumer.setId } } });
  assert.is(channel.status, 201, channel.text);
  const out = await connectMqtt(t, consumer.username, consumer.password);
  await out.subscribeAsync(`svc/output/v2/${consumer.setId}/#`, { qos: 1 });
  const received: string[] = [];
  out.on('message', (topic) => received.push(topic));

  const before = await read(t);
  assert.ok(before.value('platform_mqtt_connections', { transport: 'tcp' })! >= 2, 'the publisher and the consumer are connected');
  for (let n = 1; n <= 5; n++) await publish(c, `${ROOT}/a`, { n });
  await eventually(async () => received.length >= 5, 10_000, 'five output messages');
  const after = await read(t);

  const delta = (name: string, labels?: Record<string, string>) => (after.value(name, labels) ?? 0) - (before.value(name, labels) ?? 0);
  assert.is(delta('platform_mqtt_messages_received_total'), 5);
  assert.ok(delta('platform_mqtt_messages_sent_total') >= 5, `sent ${delta('platform_mqtt_messages_sent_total')}`);
  assert.ok(delta('platform_ingest_batch_messages_count') >= 1);
  assert.is(delta('platform_ingest_batch_messages_sum'), 5, 'every message is in one batch or another');
  assert.is(delta('platform_ingest_messages_total', { outcome: 'stored' }), 5);
  assert.ok(delta('platform_ingest_batch_duration_seconds_count') >= 1);
  assert.ok(delta('platform_ingest_latency_seconds_sum') > 0);
  assert.ok(delta('platform_eventstore_append_duration_seconds_count', { operation: 'appendMany' }) >= 1, 'ingest batches append many streams at once');
  // A batch of 1 to 5 messages lands in the histogram's buckets: the `le="5"` bucket holds them all.
  assert.is(delta('platform_ingest_batch_messages_bucket', { le: '5' }), delta('platform_ingest_batch_messages_count'));

  await c.endAsync();
  await out.endAsync();
  const closed = await eventually(async () => {
    const m = await read(t);
    return m.value('platform_mqtt_connections', { transport: 'tcp' })! <= before.value('platform_mqtt_connections', { transport: 'tcp' })! - 2 ? m : undefined;
  }, 5000, 'the two connections to be counted as closed');
  assert.ok(closed.value('platform_mqtt_connections', { transport: 'tcp' })! >= 0);
});

metrics('given a REST write, then the single-stream append latency moves', async ({ t }) => {
  const before = await read(t);
  const res = await t.call('POST', '/api/usergroups', { body: { name: 'metered group' } });
  assert.is(res.status, 201, res.text);
  const after = await read(t);
  const count = (m: Scrape) => m.value('platform_eventstore_append_duration_seconds_count', { operation: 'append' }) ?? 0;
  assert.ok(count(after) - count(before) >= 1);
});

metrics('given translator calls, one of which times out, then calls by outcome, contexts and translators move', async ({ t }) => {
  await givenTranslator(t, { name: 'metered-climate', version: '1.0.0', match: {} });
  await givenTranslator(t, {
    name: 'metered-loop',
    version: '1.0.0',
    match: {},
    spec: { temperature: { type: 'number', unit: '°C', quantity: 'temperature' } },
    code: 'function translate({ encodedData }) { if (encodedData.port === 9) while (true) {} return { result: { temperature: 1 } }; }',
  });
  const climate = await givenDevice(t, { name: 'metered climate', translatorPreferences: [{ name: 'metered-climate', version: '1.0.0', upgradePolicy: 'none' }] });
  const looping = await givenDevice(t, { name: 'metered loop', translatorPreferences: [{ name: 'metered-loop', version: '1.0.0', upgradePolicy: 'none' }] });
  const before = await read(t);
  assert.is((await uplink(t, climate._id, climateHex(20.5, 40, 3000))).temperature, 20.5);
  assert.is((await uplink(t, climate._id, climateHex(21, 41, 3000))).temperature, 21);
  await uplink(t, looping._id, 'abcd', 9);
  const after = await read(t);
  const delta = (labels: Record<string, string>) => (after.value('platform_sandbox_calls_total', labels) ?? 0) - (before.value('platform_sandbox_calls_total', labels) ?? 0);
  assert.is(delta({ outcome: 'ok' }), 2);
  assert.is(delta({ outcome: 'timeout' }), 1);
  assert.is(delta({ outcome: 'error' }), 0);
  assert.ok(after.value('platform_sandbox_translators')! >= 2);
  assert.ok(after.value('platform_sandbox_contexts')! >= 2, 'each loaded translator keeps warm contexts');
});

metrics('given the running subscribers, then each reports its lag in events and seconds, and is up', async ({ t }) => {
  const m = await eventually(async () => {
    const s = await read(t);
    return s.value('platform_subscriber_lag_events', { subscriber: 'read-models' }) === 0 ? s : undefined;
  }, 5000, 'the read models to be caught up');
  for (const subscriber of ['read-models', 'output-mqtt', 'channels-http', 'geofence-tracking', 'commands', 'rules', 'calculations']) {
    assert.is(m.value('platform_subscriber_up', { subscriber }), 1, subscriber);
    assert.ok(m.value('platform_subscriber_lag_events', { subscriber }) !== undefined, `${subscriber} lag in events`);
    assert.ok(m.value('platform_subscriber_lag_seconds', { subscriber })! >= 0, `${subscriber} lag in seconds`);
  }
});

metrics('given a subscriber that stops following, then the very next scrape shows its lag, and the one after it catches up shows none', async ({ t }) => {
  const { projections, store } = t.platform.deps;
  await eventually(async () => (await read(t)).value('platform_subscriber_lag_events', { subscriber: 'read-models' }) === 0, 5000, 'the read models to be caught up');
  await projections.stop();
  try {
    const id = randomUUID();
    await store.append(`metrics-probe-${id}`, [{ id, type: 'MetricsProbed', data: {}, metadata: { actor: 'system:test', correlationId: id, time: new Date().toISOString() } }], 'any');
    const lagging = await read(t);
    assert.ok(lagging.value('platform_subscriber_lag_events', { subscriber: 'read-models' })! >= 1, 'the scrape measured the lag it shows');
    assert.ok(lagging.value('platform_subscriber_lag_seconds', { subscriber: 'read-models' })! >= 0);
  } finally {
    await projections.start();
  }
  await eventually(async () => (await read(t)).value('platform_subscriber_lag_events', { subscriber: 'read-models' }) === 0, 5000, 'the read models to catch up again');
});

metrics.run();

const off = suite<{ t: TestPlatform }>('GET /metrics without METRICS_TOKEN');

off.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
off.after(async (ctx) => {
  await ctx.t.stop();
});

off('when METRICS_TOKEN is unset, then /metrics answers 404 to anyone, never the control panel’s page', async ({ t }) => {
  for (const authorization of [undefined, `Bearer ${TOKEN}`, `Bearer ${t.adminToken}`]) {
    const res = await fetch(`${t.baseUrl}/metrics`, { headers: authorization ? { authorization } : {} });
    const text = await res.text();
    assert.is(res.status, 404, String(authorization));
    assert.not.match(text, /<html|platform_|process_/i);
  }
});

off.run();
