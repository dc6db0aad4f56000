import { Cron } from 'croner';

/**
 * Schedule triggers: a standard 5-field cron expression (minute, hour, day of
 * month, month, day of week; the nicknames `@hourly`, `@daily`, … too),
 * evaluated by croner in `timezone` (an IANA name, UTC when left out). Day of
 * month and day of week combine with OR, as in Vixie cron.
 */
export const DEFAULT_TIMEZONE = 'UTC';

/**
 * After downtime, the latest slot that was missed still runs, once, when it is
 * at most this late (a restart or a deploy); older slots are skipped, and the
 * skip is recorded on the rule. Running every missed slot after a long outage
 * would fire a burst of stale actions (a daily "open the valve" seven times).
 */
export const SCHEDULE_CATCH_UP_MS = 15 * 60_000;

/** A schedule, or why the expression cannot be one. */
export function cronOf(expression: string, timezone: string = DEFAULT_TIMEZONE): Cron {
  const cron = new Cron(expression, { paused: true, mode: '5-part', timezone });
  return cron;
}

/** `null` when the expression and time zone make a schedule that fires after `now`; otherwise why not, for a 422. */
export function cronProblem(expression: string, timezone: string | undefined, now: Date): string | null {
  let cron: Cron;
  try {
    cron = cronOf(expression, timezone);
  } catch (error) {
    const message = (error as Error).message.replace(/^CronPattern: /, '');
    return `is not a 5-field cron expression (minute hour day-of-month month day-of-week): ${message}`;
  }
  try {
    if (!cron.nextRun(now)) return 'never fires (no date matches it)';
  } catch {
    return 'cannot be evaluated in that time zone';
  }
  return null;
}

/** Whether a time zone name is one the runtime knows. */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

/** The first slot strictly after `after`; null when none comes. */
export function nextSlot(expression: string, timezone: string | undefined, after: Date): Date | null {
  return cronOf(expression, timezone).nextRun(after);
}

/**
 * The slots in (`after`, `until`]: the latest one, and how many there were.
 * Counting stops at `cap` (a minute-by-minute schedule down for a week).
 */
export function missedSlots(expression: string, timezone: string | undefined, after: Date, until: Date, cap = 10_000): { latest: Date | null; count: number } {
  const cron = cronOf(expression, timezone);
  // Slots are whole minutes: a second past `until` takes a slot at `until` itself.
  const [previous] = cron.previousRuns(1, new Date(until.getTime() + 1000));
  const latest = previous && previous.getTime() > after.getTime() && previous.getTime() <= until.getTime() ? previous : null;
  let count = 0;
  if (latest) for (let at = cron.nextRun(after); at && at.getTime() <= latest.getTime() && count < cap; at = cron.nextRun(at)) count++;
  return { latest, count };
}
