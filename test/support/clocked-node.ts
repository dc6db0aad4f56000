import { runPlatformProcess } from '../../api/process.js';

/**
 * A platform process as `api/main.ts` runs it, with a clock the test moves
 * forward (`PlatformNode` with `movableClock`): the platform's time is the real
 * time plus an offset, which each `{ advance: ms }` message on the IPC channel
 * adds to, answered `{ offset }` once the platform's clock has it. The rules'
 * schedule looks at the clock every 100 ms, so a slot the clock was moved up to
 * comes at once instead of after up to a minute of waiting.
 */
let offset = 0;
process.on('message', (message: { advance?: unknown }) => {
  if (typeof message?.advance !== 'number') return;
  offset += message.advance;
  process.send?.({ offset });
});

await runPlatformProcess({ clock: () => new Date(Date.now() + offset), scheduleMaxWaitMs: 100 });
