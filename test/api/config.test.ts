import { spawnSync } from 'node:child_process';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../api/config.js';
import { ensureBinaries, MissingBinariesError } from '../../migrations/cluster.js';
import { makeCertificates } from '../support/certificates.js';

const config = suite('configuration');

config('given an empty environment, then the documented defaults apply', () => {
  const c = loadConfig({});
  assert.is(c.port, 3000);
  assert.is(c.mqttPort, 1883);
  assert.is(c.databaseUrl, null);
  assert.is(c.dataDir, './data');
  assert.is(c.eventstoreUrl, null);
  assert.is(c.jwtSecret, null);
  assert.is(c.metricsToken, null, 'metrics are off');
  assert.is(c.mqttTls, null, 'MQTT over TLS is off');
  assert.is(c.mqttSessionQueueLimit, 10_000);
  assert.is(c.mqttSessionExpirySeconds, 86_400, 'a persistent session ends a day after its client left');
  assert.is(loadConfig({ MQTT_SESSION_EXPIRY_SECONDS: '0' }).mqttSessionExpirySeconds, 0, '0: sessions never expire');
  assert.is(c.mqttDrainTimeoutSeconds, 30);
  assert.is(c.outboundTargets, 'public', 'requests to URLs users write reach public addresses only');
  assert.is(loadConfig({ OUTBOUND_TARGETS: 'private' }).outboundTargets, 'private');
});

for (const [name, value, words] of [
  ['PORT', 'eighty', /PORT must be a whole number/],
  ['PORT', '70000', /PORT must be a whole number from 0 to 65535/],
  ['MQTT_PORT', '-1', /MQTT_PORT/],
  ['DATABASE_URL', 'mysql://x', /DATABASE_URL must start with postgres/],
  ['DATABASE_URL', 'not a url', /DATABASE_URL must be a URL/],
  ['EVENTSTORE_URL', 'http://x:2113', /EVENTSTORE_URL must start with esdb/],
  ['JWT_SECRET', 'short', /JWT_SECRET must have at least 32 characters/],
  ['LOG_LEVEL', 'loud', /LOG_LEVEL must be one of/],
  ['METRICS_TOKEN', 'short', /METRICS_TOKEN must have at least 16 characters/],
  ['MQTT_TLS_PORT', '8883', /MQTT_TLS_PORT needs TLS_CERT_FILE and TLS_KEY_FILE/],
  ['TLS_CERT_FILE', '/etc/hostname', /TLS_CERT_FILE and TLS_KEY_FILE must be set together/],
  ['TLS_KEY_FILE', '/etc/hostname', /TLS_CERT_FILE and TLS_KEY_FILE must be set together/],
  ['MQTT_SESSION_QUEUE_LIMIT', '0', /MQTT_SESSION_QUEUE_LIMIT must be a whole number from 1 to/],
  ['MQTT_SESSION_EXPIRY_SECONDS', '1d', /MQTT_SESSION_EXPIRY_SECONDS must be a whole number/],
  ['MQTT_DRAIN_TIMEOUT_SECONDS', '0', /MQTT_DRAIN_TIMEOUT_SECONDS must be a whole number from 1 to 3600/],
  ['OUTBOUND_TARGETS', 'all', /OUTBOUND_TARGETS must be one of public, private, any/],
] as const) {
  config(`when ${name}=${value}, then start-up stops with a message naming ${name}`, () => {
    try {
      loadConfig({ [name]: value });
      assert.unreachable('accepted a bad value');
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.match((error as Error).message, words);
    }
  });
}

for (const [env, password, shown] of [
  [{ DATABASE_URL: 'postgres://platform:s3cr#et@db/platform' }, 's3cr#et', "DATABASE_URL must be a URL (postgres://, postgresql://), got 'postgres://platform:***@db/platform'"],
  [{ DATABASE_URL: 'postgres://platform:s3cret@db:99999/platform' }, 's3cret', "got 'postgres://platform:***@db:99999/platform'"],
  [{ REDIS_URL: 'redis://:hunter2@redis:6379x', DATABASE_URL: 'postgres://db/x', JWT_SECRET: 'x'.repeat(32) }, 'hunter2', "REDIS_URL must be a URL (redis://, rediss://), got 'redis://:***@redis:6379x'"],
  [{ REDIS_URL: 'redis://hunter2@redis:6379x', DATABASE_URL: 'postgres://db/x', JWT_SECRET: 'x'.repeat(32) }, 'hunter2', "got 'redis://***@redis:6379x'"],
  [{ EVENTSTORE_URL: 'esdb://admin:changeit@es:2113x?tls=false' }, 'changeit', "EVENTSTORE_URL must be a URL (esdb://, esdb+discover://), got 'esdb://admin:***@es:2113x?tls=false'"],
  [{ DATABASE_URL: 'postgres://platform:pa/ss@word@db:x/platform' }, 'pa/ss@word', "got 'postgres://platform:***@db:x/platform'"],
] as const) {
  config(`when ${Object.keys(env)[0]} is a URL with a password that does not parse, then the message names the variable and shows the URL with its password masked`, () => {
    let message = '';
    try {
      loadConfig(env);
    } catch (error) {
      assert.instance(error, ConfigError);
      message = (error as Error).message;
    }
    assert.ok(message.includes(shown), message);
    assert.not.ok(message.includes(password), `the message shows no password: ${message}`);
  });
}

config('when only one of ADMIN_USERNAME and ADMIN_PASSWORD is set, then start-up stops', () => {
  assert.throws(() => loadConfig({ ADMIN_USERNAME: 'root' }), /set together/);
});

config('given TLS_CERT_FILE and TLS_KEY_FILE, then MQTT over TLS is on, at 8883 unless MQTT_TLS_PORT says otherwise; files that cannot be read, are not PEM, or are not a pair stop the start naming the variable', () => {
  const certs = makeCertificates();
  try {
    const env = { TLS_CERT_FILE: certs.cert, TLS_KEY_FILE: certs.key };
    assert.equal(loadConfig(env).mqttTls, { port: 8883, certFile: certs.cert, keyFile: certs.key });
    assert.is(loadConfig({ ...env, MQTT_TLS_PORT: '18883' }).mqttTls?.port, 18883);
    assert.throws(() => loadConfig({ ...env, MQTT_TLS_PORT: 'tls' }), /MQTT_TLS_PORT must be a whole number/);
    assert.throws(() => loadConfig({ ...env, TLS_KEY_FILE: `${certs.dir}/missing.key` }), /TLS_KEY_FILE cannot be read: ENOENT/);
    assert.throws(() => loadConfig({ ...env, TLS_CERT_FILE: certs.key }), /TLS_CERT_FILE must be a PEM certificate/);
    assert.throws(() => loadConfig({ ...env, TLS_CERT_FILE: certs.strayCert }), /TLS_CERT_FILE and TLS_KEY_FILE must be a PEM certificate and its own private key/);
  } finally {
    certs.remove();
  }
});

config('when the platform is started with MQTT_TLS_PORT but no certificate, then it stops at once with one line naming the variables', () => {
  const root = new URL('../..', import.meta.url).pathname;
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'api/main.ts'], { cwd: root, encoding: 'utf8', timeout: 30_000, env: { PATH: process.env.PATH, MQTT_TLS_PORT: '8883' } });
  assert.is(run.status, 2, run.stderr);
  assert.is(run.stderr.trim().split('\n').length, 1, run.stderr);
  assert.match(run.stderr, /^configuration: MQTT_TLS_PORT needs TLS_CERT_FILE and TLS_KEY_FILE/);
});

config('given no PostgreSQL binaries and no permission to install, then one line names the packages and DATABASE_URL', () => {
  try {
    ensureBinaries({ binDirs: ['/nonexistent/postgresql/bin'], install: false });
    assert.unreachable('found binaries in a folder that does not exist');
  } catch (error) {
    assert.instance(error, MissingBinariesError);
    const message = (error as Error).message;
    assert.not.match(message, /\n/);
    assert.match(message, /postgresql-15 postgresql-15-postgis-3/);
    assert.match(message, /DATABASE_URL/);
  }
});

config.run();
