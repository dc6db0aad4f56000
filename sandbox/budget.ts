/**
 * How much of the event loop failing translator code may take for one payer.
 * A call runs in the platform's own thread until its deadline (1 s, the
 * contract's), and a lost context takes tens of milliseconds to rebuild, so
 * every time-out stalls every tenant's ingest and requests for a second. With
 * `limit` strikes (time-outs or lost contexts) within the last `windowMs`, the
 * payer's calls are refused until the oldest of them is older than the window.
 *
 * Who pays is the caller's choice: ingest charges a translator version on the
 * devices of one owner (`ingest/translate.ts`, besides its suspension per
 * device), uploads and imports the user running them (`api/translators`).
 * Kept per process, as each node runs its own sandbox.
 */
export class TimeoutBudget {
  private strikes = new Map<string, number[]>();

  constructor(
    readonly limit = 5,
    readonly windowMs = 60_000,
    private readonly now: () => number = Date.now,
    /** Payers remembered at once; the quiet ones are forgotten first, then those charged longest ago. */
    private readonly capacity = 10_000,
  ) {}

  /** Counts a time-out or a lost context against `payer`. Answers when its calls run again: 0 while within the budget. */
  charge(payer: string): number {
    const now = this.now();
    const recent = this.recent(payer, now);
    recent.push(now);
    this.strikes.delete(payer);
    this.strikes.set(payer, recent);
    if (this.strikes.size > this.capacity) this.sweep(now);
    return this.blockedUntil(payer);
  }

  /** When the payer's translator calls run again: 0 when they run now. */
  blockedUntil(payer: string): number {
    const now = this.now();
    const recent = this.recent(payer, now);
    // No strike comes while calls are refused: the block ends when the oldest of the last `limit` leaves the window.
    return recent.length < this.limit ? 0 : recent[recent.length - this.limit]! + this.windowMs;
  }

  private recent(payer: string, now: number): number[] {
    return (this.strikes.get(payer) ?? []).filter((t) => now - t < this.windowMs);
  }

  /** Forgets payers with no strike in the window, then, if still too many, those charged longest ago (the map keeps charge order). */
  private sweep(now: number): void {
    for (const [payer, times] of this.strikes) if (times.every((t) => now - t >= this.windowMs)) this.strikes.delete(payer);
    for (const payer of this.strikes.keys()) {
      if (this.strikes.size <= this.capacity) return;
      this.strikes.delete(payer);
    }
  }
}
