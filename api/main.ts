import { runPlatformProcess } from './process.js';

/** The platform process: HTTP API, MQTT broker, ingest and projections. */
await runPlatformProcess();
