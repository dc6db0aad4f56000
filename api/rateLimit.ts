import { TooManyRequestsError } from '../domain/shared/errors.js';

/**
 * A token bucket per key (a user id): `burst` requests at once, refilled at
 * `perMinute`. Kept in memory per process; the map forgets idle keys, so its
 * size follows the callers of the last few minutes.
 */
export class RateLimiter {
  private buckets = new Map<string, { tokens: number; at: number }>();

  constructor(
    private readonly what: string,
    private readonly perMinute: number,
    private readonly burst: number = perMinute,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Takes one token for `key`, or throws 429 naming when the next one is due. */
  take(key: string): void {
    this.check(key);
    this.spend(key);
  }

  /** Throws 429 when `key` has no token left, taking none: for limits on what failed, checked before the work. */
  check(key: string): void {
    const b = this.refilled(key);
    if (b.tokens < 1) {
      const wait = Math.ceil(((1 - b.tokens) / this.perMinute) * 60);
      throw new TooManyRequestsError(`ERR - too many ${this.what}: at most ${this.perMinute} a minute; try again in ${wait} s`, wait);
    }
  }

  /** Takes one token for `key`, down to none. */
  spend(key: string): void {
    const b = this.refilled(key);
    b.tokens = Math.max(0, b.tokens - 1);
  }

  private refilled(key: string): { tokens: number; at: number } {
    const now = this.clock();
    const b = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    b.tokens = Math.min(this.burst, b.tokens + ((now - b.at) / 60_000) * this.perMinute);
    b.at = now;
    this.buckets.set(key, b);
    if (this.buckets.size > 10_000) for (const [k, v] of this.buckets) if (now - v.at > 10 * 60_000) this.buckets.delete(k);
    return b;
  }
}

/** Claims per user and minute: enough to onboard a box of devices by hand, too few to guess secrets. */
export const CLAIMS_PER_MINUTE = 10;

/**
 * Failed logins a minute per username from one client address, and per
 * client address. Only failures count, and a username's count is kept per
 * address, so nobody's guesses from elsewhere lock its owner out; past either
 * limit a login answers 429 before the password is hashed, so guessing costs
 * the platform no scrypt.
 */
export const FAILED_LOGINS_PER_MINUTE = { username: 10, address: 30 };
