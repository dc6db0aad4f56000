import { pino } from 'pino';
import { ConfigError, loadConfig } from './config.js';
import { MissingBinariesError } from '../migrations/cluster.js';
import { startPlatform, type Platform, type PlatformOptions } from './platform.js';

/**
 * How long a stop may take in all: past it the process exits with what is left (a private PostgreSQL left
 * running is found running, and used, at the next start). The HTTP grace and the pipeline's last batches fit in it.
 */
const STOP_DEADLINE_MS = 30_000;

/**
 * The platform as a process (`api/main.ts`): configured from the environment, stopped by SIGINT or SIGTERM,
 * exiting with 2 on a configuration error, 3 when PostgreSQL's binaries are missing and 1 on any other failure to
 * start. `options` are the platform's own (a test's process sets its clock); the process handles the signal.
 */
export async function runPlatformProcess(options: Omit<PlatformOptions, 'signal'> = {}): Promise<void> {
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

  // A promise rejected with no handler is a fault of the platform: logged, and the process goes on serving.
  process.on('unhandledRejection', (reason) => log.error({ err: reason }, 'a promise was rejected and nothing handled it'));

  // Installed before the start: a signal during the start stops what it has started (the private PostgreSQL too).
  const starting = new AbortController();
  let platform: Platform | null = null;
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) {
      log.warn({ signal }, 'a second signal while stopping: exiting at once');
      process.exit(1);
    }
    log.info({ signal }, 'stopping');
    setTimeout(() => {
      log.error({ deadlineMs: STOP_DEADLINE_MS }, 'stopping took too long: exiting with what has not stopped');
      process.exit(1);
    }, STOP_DEADLINE_MS);
    if (platform) void stop(platform);
    else starting.abort(new Error(`${signal} during the start`));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  async function stop(p: Platform): Promise<never> {
    try {
      await p.stop();
      log.info('stopped');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'stopping failed');
      process.exit(1);
    }
  }

  try {
    platform = await startPlatform(config, log, { ...options, signal: starting.signal });
    // A signal that came while the last step of the start finished.
    if (starting.signal.aborted) await stop(platform);
  } catch (error) {
    if (starting.signal.aborted) {
      log.info('stopped during the start');
      process.exit(0);
    }
    if (error instanceof MissingBinariesError) {
      console.error(error.message);
      process.exit(3);
    }
    log.fatal({ err: error }, 'the platform failed to start');
    process.exit(1);
  }
}
