import type { Logger } from 'pino';
import type { EventStore } from '../eventstore/port.js';
import { writeLog, type LogEntry } from './logEntry.js';

/** Per resource and minute, at most this many entries of one kind; the rest are counted and summed up in one entry. */
const PER_MINUTE = 20;
/**
 * Per resource and minute, at most this many entries of all kinds together: a kind may quote the client (a field's
 * path, a topic), so a client that varies it would otherwise pass the limit per kind with every message.
 */
const PER_MINUTE_ALL_KINDS = 60;

/**
 * Writes user-visible log entries for the data path (refused logins and
 * publishes, undeliverable channel messages) without letting a misbehaving
 * client turn them into a write flood: entries are limited per resource and
 * kind and per resource, and the suppressed ones are reported as a count.
 */
export class LogWriter {
  private windows = new Map<string, { start: number; count: number; suppressed: number }>();
  /** Appends under way. */
  private readonly appending = new Set<Promise<void>>();

  constructor(
    private readonly store: EventStore,
    private readonly log: Logger,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** Fire and forget: a failing log write is reported to the process log and never breaks the caller. */
  write(entry: LogEntry, kind: string = entry.message): void {
    const now = this.clock();
    const all = this.window(`${entry.resourceId}\u0000`, entry, now, (n) => `${n} more entries were left out in the last minute`);
    const one = this.window(`${entry.resourceId}\u0000${kind}`, entry, now, (n) => `${n} more entries like "${kind.slice(0, 200)}" were left out in the last minute`);
    if (all.count >= PER_MINUTE_ALL_KINDS || one.count >= PER_MINUTE) {
      // Counted once, where it was left out: by its kind when its kind is full, otherwise with all kinds.
      if (one.count >= PER_MINUTE) one.suppressed++;
      else all.suppressed++;
      return;
    }
    all.count++;
    one.count++;
    this.append(entry, now);
  }

  /** The current minute's window of `key`; a window that ended is summed up (`summary`) when it left entries out. */
  private window(key: string, entry: LogEntry, now: Date, summary: (n: number) => string) {
    let w = this.windows.get(key);
    if (!w || now.getTime() - w.start >= 60_000) {
      if (w?.suppressed) this.append({ ...entry, message: summary(w.suppressed) }, now);
      w = { start: now.getTime(), count: 0, suppressed: 0 };
      this.windows.set(key, w);
      if (this.windows.size > 100_000) this.prune(now.getTime());
    }
    return w;
  }

  /** Resolves once every entry written so far is appended to the store, or its append has failed (and was reported). */
  async idle(): Promise<void> {
    while (this.appending.size > 0) await Promise.all(this.appending);
  }

  private append(entry: LogEntry, now: Date): void {
    const context = { actor: 'system:ingest', correlationId: `log:${entry.resourceId}`, now: now.toISOString() };
    const appended = writeLog(this.store, entry, context).then(
      () => undefined,
      (err) => this.log.error({ err, entry }, 'writing a log entry failed'),
    );
    this.appending.add(appended);
    void appended.then(() => this.appending.delete(appended));
  }

  private prune(now: number): void {
    for (const [k, w] of this.windows) if (now - w.start >= 60_000) this.windows.delete(k);
  }
}
