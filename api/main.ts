import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';
import { MissingBinariesError } from '../migrations/cluster.js';
import { startPlatform } from './platform.js';

/** The platform process: HTTP API, MQTT broker, ingest and projections. */
let config;
try {
  config = loadConfig();
} catch (error) {
  if (error instanceof ConfigError) {
    console.error(`configuration: ${error.message}`);
    process.exit(2);
  }
  throw error;
}
const log = pino({ level: config.logLevel });

try {
  const platform = await startPlatform(config, log);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    await platform.stop();
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
} catch (error) {
  if (error instanceof MissingBinariesError) {
    console.error(error.message);
    process.exit(3);
  }
  log.fatal({ err: error }, 'the platform failed to start');
  process.exit(1);
}
