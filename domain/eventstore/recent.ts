import { comparePositions, type Position, type RecordedEvent } from '../shared/events.js';

/** The longest wait between reads while an append of this process is out of the store's reach; the store's own poll is 100 ms. */
const MAX_RETRY_MS = 100;

/** `null` (before the first event) sorts below every position. */
const compare = (a: Position | null, b: Position | null): number => (a === null ? (b === null ? 0 : -1) : b === null ? 1 : comparePositions(a, b));

/**
 * The recent part of the store's global order, read once for every
 * subscriber of the process. The projection runner and each reactor follow
 * the same log a few milliseconds apart; reading it once and handing every
 * one of them its batch from memory spares the database (and this process)
 * a read and a decode of each event per subscriber.
 *
 * The window holds every event after `from` up to its last one, with no gap:
 * it only grows by reading after its own end, and the store's reads never
 * return an event that a later commit could precede. A subscriber inside the
 * window is served from it; one at its end makes it read on (one read at a
 * time, shared by whoever waits); one behind it (catching up from far back)
 * reads the store itself until it reaches the window. The window keeps at
 * most `cap` events: past it, the oldest are dropped down to three quarters
 * of it, so that the copy this takes is made once per quarter of the cap
 * instead of on every read (a full window of 20,000 copied on each read cost
 * about 1 % of the platform's CPU under load).
 *
 * The events are shared: a handler must not change them. They are frozen
 * (shallowly) so an attempt fails loudly instead of reaching the others.
 */
export class RecentEvents {
  /** Every event after this and up to the last in `events` is held; `undefined` until the first read. */
  private from: Position | null | undefined = undefined;
  private events: RecordedEvent[] = [];
  private reading: Promise<void> | null = null;
  /** Appends made through this process so far, and how many of them the last read started after. */
  private appends = 0;
  private readFrom = 0;
  /** The latest transaction that appended through this process; whether the last read found nothing; the wait before the next read while that lasts. */
  private committed = 0n;
  private stalled = false;
  private delay = 0;
  private retrying: Promise<void> | null = null;

  constructor(
    private readonly read: (after: Position | null, limit: number) => Promise<RecordedEvent[]>,
    private readonly cap = 20_000,
    private readonly chunk = 1_000,
  ) {}

  /** Up to `limit` events after `after`, in global order; empty when there is none yet. */
  async next(after: Position | null, limit: number): Promise<RecordedEvent[]> {
    if (this.from === undefined) this.from = after;
    if (compare(after, this.from!) < 0) return this.read(after, limit);
    if (compare(after, this.end) >= 0) {
      // Ahead of an empty window (it started at an older subscriber that has not read yet): start it here instead.
      if (this.events.length === 0 && compare(after, this.from!) > 0) this.from = after;
      if (this.stalled && this.heldBack(after)) await this.retry();
      else {
        // A read already under way may have started before the append that woke this caller: then read once more.
        const seen = this.appends;
        await this.readOn();
        if (this.readFrom < seen && compare(after, this.end) >= 0) await this.readOn();
      }
      if (compare(after, this.from!) < 0) return this.read(after, limit);
      if (compare(after, this.end) > 0) return this.read(after, limit);
    }
    return this.slice(after, limit);
  }

  /** An append through this process committed in transaction `commit`: reads started before it may miss it. */
  appended(commit: bigint): void {
    this.appends++;
    if (commit > this.committed) this.committed = commit;
  }

  /**
   * True when a subscriber at `after` has read all it can, yet an append of
   * this process is still beyond it. The store reads nothing past the oldest
   * transaction in flight anywhere on the PostgreSQL server, so a commit can
   * stay out of reach for as long as an older transaction (of any database
   * on the server) runs. Its wake-up has then been spent on a read that
   * found nothing: the subscriber must read again soon instead of waiting
   * for the next poll.
   */
  heldBack(after: Position | null): boolean {
    if (this.from === undefined || compare(after, this.end) < 0) return false;
    return (after?.commit ?? 0n) < this.committed;
  }

  /** The position of the last event held (or where the window starts, when it holds none). */
  private get end(): Position | null {
    return this.events.length ? this.events[this.events.length - 1]!.position : this.from!;
  }

  private slice(after: Position | null, limit: number): RecordedEvent[] {
    // The first event past `after`, by bisection: subscribers usually ask from an event of the window.
    let lo = 0;
    let hi = this.events.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (compare(this.events[mid]!.position, after) <= 0) lo = mid + 1;
      else hi = mid;
    }
    return this.events.slice(lo, lo + limit);
  }

  /** One read after a wait that doubles while reads keep finding nothing (1 ms up to 100 ms), shared by every subscriber waiting. */
  private retry(): Promise<void> {
    this.retrying ??= (async () => {
      this.delay = Math.min(Math.max(1, this.delay * 2), MAX_RETRY_MS);
      await new Promise((resolve) => setTimeout(resolve, this.delay));
      await this.readOn();
    })().finally(() => {
      this.retrying = null;
    });
    return this.retrying;
  }

  private readOn(): Promise<void> {
    this.reading ??= (async () => {
      const from = this.appends;
      try {
        const fresh = await this.read(this.end, this.chunk);
        this.stalled = fresh.length === 0;
        if (fresh.length > 0) this.delay = 0;
        for (const event of fresh) {
          Object.freeze(event.data);
          Object.freeze(event.metadata);
          this.events.push(Object.freeze(event));
        }
        this.readFrom = from;
        // Past the cap, down to three quarters of it: dropping the oldest copies the window, so not on every read.
        const excess = this.events.length > this.cap ? this.events.length - Math.floor((this.cap * 3) / 4) : 0;
        if (excess > 0) {
          this.from = this.events[excess - 1]!.position;
          this.events = this.events.slice(excess);
        }
      } finally {
        this.reading = null;
      }
    })();
    return this.reading;
  }
}
