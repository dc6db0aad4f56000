import type { Logger } from 'pino';
import type { EventStore } from '../eventstore/port.js';
import { writeLog, type LogEntry } from './logEntry.js';

/** Per resource and minute, at most this many entries of one kind; the rest are counted and summed up in one entry. */
const PER_MINUTE = 20;

/**
 * Writes user-visible log entries for the data path (refused logins and
 * publishes, undeliverable channel messages) without letting a misbehaving
 * client turn them into a write flood: entries are limited per resource and
 * kind, and the suppressed ones are reported as a count.
 */
export class LogWriter {
  private windows = new Map<string, { start: number; count: number; suppressed: number }>();

  constructor(
    private readonly store: EventStore,
    private readonly log: Logger,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Fire and forget: a failing log write is reported to the process log and never breaks the caller. */
  write(entry: LogEntry, kind: string = entry.message): void {
    const now = this.clock();
    const key = `${entry.resourceId}\u0000${kind}`;
    let w = this.windows.get(key);
    if (!w || now.getTime() - w.start >= 60_000) {
      if (w?.suppressed) this.append({ ...entry, message: `${w.suppressed} more entries like "${kind}" were left out in the last minute` }, now);
      w = { start: now.getTime(), count: 0, suppressed: 0 };
      this.windows.set(key, w);
      if (this.windows.size > 100_000) this.prune(now.getTime());
    }
    if (w.count >= PER_MINUTE) {
      w.suppressed++;
      return;
    }
    w.count++;
    this.append(entry, now);
  }

  private append(entry: LogEntry, now: Date): void {
    const context = { actor: 'system:ingest', correlationId: `log:${entry.resourceId}`, now: now.toISOString() };
    writeLog(this.store, entry, context).catch((err) => this.log.error({ err, entry }, 'writing a log entry failed'));
  }

  private prune(now: number): void {
    for (const [k, w] of this.windows) if (now - w.start >= 60_000) this.windows.delete(k);
  }
}
