import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect as connectTcp } from 'node:net';
import { connect as connectTls } from 'node:tls';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { makeCertificates, type Certificates } from '../support/certificates.js';
import { scrape } from '../support/metrics.js';
import { closed, deviceOf, eventually, givenProvider, projected, type Provider } from './support.js';
import { MAX_PACKET_BYTES } from '../../ingest/broker.js';

const ROOT = 'svc/generic/v2/tls';
const TOKEN = 'metrics-token-for-the-tls-suite';

const tls = suite<{ t: TestPlatform; certs: Certificates; p: Provider; port: number }>('MQTT over TLS (MQTT_TLS_PORT)');

tls.before(async (ctx) => {
  ctx.certs = makeCertificates();
  ctx.t = await startTestPlatform({ mqttTls: { port: 0, certFile: ctx.certs.cert, keyFile: ctx.certs.key }, metricsToken: TOKEN });
  ctx.port = ctx.t.platform.mqttTlsPort!;
  ctx.p = await givenProvider(ctx.t, 'tls-provider', [`${ROOT}/mosquitto`, `${ROOT}/mqttjs`, `${ROOT}/refused`, `${ROOT}/large`]);
});
tls.after(async (ctx) => {
  await ctx.t.stop();
  ctx.certs.remove();
});

/** Runs Debian's `mosquitto_pub` (mosquitto-clients); resolves with its exit code and output. */
const mosquittoPub = (args: string[]) =>
  new Promise<{ code: number; output: string }>((resolve) => {
    execFile('mosquitto_pub', args, { timeout: 15_000 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output: `${stdout}${stderr}` });
    });
  });

/** An MQTT.js connection over TLS; rejects with the client's error when the connection fails. */
const connectMqtts = (port: number, options: IClientOptions) =>
  new Promise<MqttClient>((resolve, reject) => {
    const client = mqtt.connect(`mqtts://localhost:${port}`, { reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4, ...options });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });

const refusals = (t: TestPlatform) => t.logs.filter((l) => l.msg === 'MQTT TLS handshake refused');

tls('given the CA that signed the server certificate, when mosquitto_pub publishes with --cafile, then the message is stored as over plain MQTT', async ({ t, certs, p, port }) => {
  const topic = `${ROOT}/mosquitto`;
  const run = await mosquittoPub(['-h', 'localhost', '-p', String(port), '--cafile', certs.ca, '-u', p.username, '-P', p.password, '-i', 'tls-mosquitto', '-q', '1', '-t', topic, '-m', JSON.stringify({ temperature: 21.5 })]);
  assert.is(run.code, 0, run.output);
  const device = await deviceOf(t, topic);
  assert.is(device.temperature, 21.5);
});

tls('when mosquitto_pub does not trust the server’s certificate, then the handshake is refused, logged with its reason, and nothing is stored', async ({ t, certs, p, port }) => {
  const before = refusals(t).length;
  const run = await mosquittoPub(['-h', 'localhost', '-p', String(port), '--cafile', certs.otherCa, '-u', p.username, '-P', p.password, '-i', 'tls-untrusting', '-q', '1', '-t', `${ROOT}/refused`, '-m', '{"x":1}']);
  assert.is.not(run.code, 0, 'mosquitto_pub fails');
  assert.match(run.output, /certificate verify failed|TLS error/i, run.output);
  const logged = await eventually(async () => refusals(t).slice(before)[0], 5000, 'the refusal in the log');
  assert.match(String(logged.code), /UNKNOWN_CA|BAD_CERTIFICATE/, JSON.stringify(logged));
  assert.ok(logged.remote, 'the log line names the remote address');
  await projected(t);
  assert.is(await t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', `${ROOT}/refused`).executeTakeFirst(), undefined);
});

tls('given MQTT.js with the CA, then the same login and topic rules hold as on plain MQTT: a wrong password is refused, a topic not reserved closes the connection', async ({ t, certs, p, port }) => {
  const ca = readFileSync(certs.ca);
  const c = await connectMqtts(port, { ca, username: p.username, password: p.password, clientId: 'tls-mqttjs' });
  await c.publishAsync(`${ROOT}/mqttjs`, JSON.stringify({ humidity: 40 }), { qos: 1 });
  assert.is((await deviceOf(t, `${ROOT}/mqttjs`)).humidity, 40);

  const m = await scrape(t.baseUrl, TOKEN);
  assert.ok(m.value('platform_mqtt_connections', { transport: 'tls' })! >= 1, 'the TLS connection is counted as tls');

  try {
    await connectMqtts(port, { ca, username: p.username, password: 'not-the-password', clientId: 'tls-wrong' });
    assert.unreachable('a wrong password logged in over TLS');
  } catch (error) {
    assert.match((error as Error).message, /Bad username or password/);
  }

  const gone = closed(c);
  c.publish('svc/generic/v2/not-reserved', JSON.stringify({ x: 1 }), { qos: 1 });
  assert.ok(await gone, 'a publish on a topic not reserved to the set closes the connection');
  c.end(true);
  const refusal = await eventually(async () => {
    const res = await t.call('GET', `/api/logs?resourceId=${p.setId}&limit=100`);
    return (res.body.logs as { message: string; type: string }[]).find((l) => l.message.includes('svc/generic/v2/not-reserved'));
  }, 5000, 'the refusal logged on the credentials set');
  assert.is(refusal.message, 'MQTT publish on svc/generic/v2/not-reserved refused: the topic is not reserved to this credentials set');
  assert.is(refusal.type, 'warning');
});

tls('given an app over TLS, then it receives its output topic, and a new secret closes its TLS connection as on plain MQTT', async ({ t, certs, p, port }) => {
  const ca = readFileSync(certs.ca);
  const device = (await deviceOf(t, `${ROOT}/mqttjs`))._id;
  const app = await t.call('POST', '/api/apps', { body: { name: 'TLS dashboard' } });
  assert.is(app.status, 201, app.text);
  const channel = await t.call('POST', '/api/channels', { body: { name: 'to the TLS app', iotnode: device, mqtt: { type: 'app', recipient: app.body._id } } });
  assert.is(channel.status, 201, channel.text);
  const consumer = await connectMqtts(port, { ca, username: app.body._id, password: app.body.secret, clientId: 'tls-app' });
  await consumer.subscribeAsync(`svc/output/v2/${app.body._id}/#`, { qos: 1 });
  const received = new Promise<string>((resolve) => consumer.once('message', (topic) => resolve(topic)));

  const publisher = await connectMqtts(port, { ca, username: p.username, password: p.password, clientId: 'tls-app-feed' });
  await publisher.publishAsync(`${ROOT}/mqttjs`, JSON.stringify({ humidity: 42 }), { qos: 1 });
  await publisher.endAsync();
  assert.match(await received, new RegExp(`^svc/output/v2/${app.body._id}/`));

  const gone = closed(consumer);
  assert.is((await t.call('POST', `/api/apps/${app.body._id}/secret`)).status, 200);
  assert.ok(await gone, 'the TLS connection opened with the old secret is closed');
  consumer.end(true);
  try {
    await connectMqtts(port, { ca, username: app.body._id, password: app.body.secret, clientId: 'tls-app-old' });
    assert.unreachable('the old secret logged in over TLS');
  } catch (error) {
    assert.match((error as Error).message, /Not authorized|Bad username or password/);
  }
});

tls('given MQTT.js without the CA (the system trust store), then the client refuses the server’s certificate and nothing is stored', async ({ t, p, port }) => {
  try {
    await connectMqtts(port, { username: p.username, password: p.password, clientId: 'tls-no-ca' });
    assert.unreachable('connected to a server its trust store does not vouch for');
  } catch (error) {
    assert.match((error as NodeJS.ErrnoException).code ?? (error as Error).message, /SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY/);
  }
  const health = await t.call('GET', '/api/health', { token: null });
  assert.is(health.status, 200, 'the platform serves on');
});

tls('when a client speaks plain MQTT or an old TLS version on the TLS port, then the handshake is refused and logged, and the platform serves on', async ({ t, p, port }) => {
  const before = refusals(t).length;
  try {
    await new Promise<void>((resolve, reject) => {
      const c = mqtt.connect(`mqtt://127.0.0.1:${port}`, { username: p.username, password: p.password, reconnectPeriod: 0, connectTimeout: 3000 });
      c.once('connect', () => reject(new Error('plain MQTT connected on the TLS port')));
      c.once('close', () => {
        c.end(true);
        resolve();
      });
    });
  } finally {
    // nothing to clean up: the broker closed the connection
  }
  const plain = await eventually(async () => refusals(t).slice(before)[0], 5000, 'the plain MQTT refusal in the log');
  assert.match(String(plain.code), /WRONG_VERSION|UNKNOWN_PROTOCOL|HTTP_REQUEST|RECORD/, JSON.stringify(plain));

  const old = await new Promise<Error>((resolve) => {
    const socket = connectTls({ host: '127.0.0.1', port, minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0', rejectUnauthorized: false });
    socket.once('secureConnect', () => resolve(new Error('a TLS 1.1 handshake succeeded')));
    socket.once('error', resolve);
  });
  assert.not.match(old.message, /succeeded/);
  await eventually(async () => refusals(t).length >= before + 2 || undefined, 5000, 'the old-protocol refusal in the log');

  const m = await scrape(t.baseUrl, TOKEN);
  assert.ok(m.value('platform_mqtt_tls_handshakes_refused_total')! >= 3, 'every refused handshake is counted');
  assert.is((await t.call('GET', '/api/health', { token: null })).status, 200);
});

tls('when a client over TLS declares a packet larger than the limit, then the connection closes before it is read, as on plain MQTT', async ({ t, certs, p, port }) => {
  const c = await connectMqtts(port, { ca: readFileSync(certs.ca), username: p.username, password: p.password, clientId: 'tls-large' });
  const gone = closed(c);
  // The fixed header of a PUBLISH that declares MAX_PACKET_BYTES + 1 bytes, written straight to the TLS stream.
  let length = MAX_PACKET_BYTES + 1;
  const header = [0x32];
  do {
    let byte = length % 128;
    length = Math.floor(length / 128);
    if (length > 0) byte |= 0x80;
    header.push(byte);
  } while (length > 0);
  (c.stream as unknown as { write(b: Buffer): void }).write(Buffer.from(header));
  assert.ok(await gone, 'the broker closed the connection');
  c.end(true);
  const logs = await eventually(async () => {
    const res = await t.call('GET', `/api/logs?resourceId=${p.setId}&limit=100`);
    return (res.body.logs as { message: string }[]).find((l) => /larger than the limit/.test(l.message));
  }, 5000, 'the oversized packet logged on the credentials set');
  assert.match(logs.message, /MQTT connection closed/);
});

tls('when TCP clients connect to the plain port, then TLS changes nothing there', async ({ t, p }) => {
  const socket = connectTcp(t.mqttPort, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  socket.destroy();
  const c = await new Promise<MqttClient>((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${t.mqttPort}`, { username: p.username, password: p.password, reconnectPeriod: 0, protocolVersion: 4 });
    client.once('connect', () => resolve(client));
    client.once('error', reject);
  });
  await c.publishAsync(`${ROOT}/mqttjs`, JSON.stringify({ humidity: 41 }), { qos: 1 });
  await eventually(async () => (await deviceOf(t, `${ROOT}/mqttjs`)).humidity === 41 || undefined, 5000, 'the plain publish');
  await c.endAsync();
});

tls.run();
