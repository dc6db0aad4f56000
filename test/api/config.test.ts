import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../../api/config.js';
import { ensureBinaries, MissingBinariesError } from '../../migrations/cluster.js';

const config = suite('configuration');

config('given an empty environment, then the documented defaults apply', () => {
  const c = loadConfig({});
  assert.is(c.port, 3000);
  assert.is(c.mqttPort, 1883);
  assert.is(c.databaseUrl, null);
  assert.is(c.dataDir, './data');
  assert.is(c.eventstoreUrl, null);
  assert.is(c.jwtSecret, null);
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

config('when only one of ADMIN_USERNAME and ADMIN_PASSWORD is set, then start-up stops', () => {
  assert.throws(() => loadConfig({ ADMIN_USERNAME: 'root' }), /set together/);
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
