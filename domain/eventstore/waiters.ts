import type { Position } from '../shared/events.js';
import { UnavailableError } from '../shared/errors.js';

/**
 * Callers waiting for a follower of the log to reach a position (a REST write
 * for the read models, a node for its own indexes). `settle` answers those
 * whose position is reached; the others fail with `UnavailableError` after
 * their time-out, with the message the follower gives.
 */
export class PositionWaiters {
  private waiting: { position: Position; resolve: () => void }[] = [];

  constructor(private readonly tooLate: string) {}

  get size(): number {
    return this.waiting.length;
  }

  wait(position: Position, timeoutMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const waiter = {
        position,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiting = this.waiting.filter((w) => w !== waiter);
        reject(new UnavailableError(this.tooLate));
      }, timeoutMs);
      this.waiting.push(waiter);
    });
  }

  settle(reached: (position: Position) => boolean): void {
    if (this.waiting.length === 0) return;
    const ready = this.waiting.filter((w) => reached(w.position));
    if (ready.length === 0) return;
    this.waiting = this.waiting.filter((w) => !ready.includes(w));
    for (const w of ready) w.resolve();
  }
}
