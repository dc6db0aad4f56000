/**
 * Warm contexts for one translator version. Creating a context costs tens of
 * milliseconds (a WebAssembly instance, then lodash evaluated in it); a call
 * on a warm one costs microseconds. So the pool keeps up to `size` contexts
 * ready, lends one per call, and after a context is thrown away it builds a
 * replacement in the background so the next call rarely waits.
 */
import type { TranslatorContext } from './context.js';

export interface PoolStats {
  /** Contexts ready for a call. */
  warm: number;
  /** Contexts being built. */
  creating: number;
  /** Contexts built over the pool's life. */
  created: number;
  /** Contexts thrown away after a failure (timeout, memory, a throw). */
  discarded: number;
}

interface Waiter {
  resolve(context: TranslatorContext): void;
  reject(error: unknown): void;
}

export interface PoolHooks {
  /** Builds one context; also accounts for it sandbox-wide. */
  create(): Promise<TranslatorContext>;
  /** Disposes one context; also accounts for it sandbox-wide. */
  destroy(context: TranslatorContext): void;
}

export class ContextPool {
  private readonly idle: TranslatorContext[] = [];
  private readonly waiters: Waiter[] = [];
  private creating = 0;
  private created = 0;
  private discarded = 0;
  private closed = false;

  constructor(
    private readonly size: number,
    private readonly hooks: PoolHooks,
  ) {}

  /** Adopts a context built elsewhere (the one that validated the code at load). */
  adopt(context: TranslatorContext): void {
    this.created++;
    this.giveBack(context);
  }

  /** A warm context if one is ready, otherwise a promise of the next one. */
  take(): TranslatorContext | Promise<TranslatorContext> {
    if (this.closed) return Promise.reject(new Error('translator was unloaded'));
    const ready = this.idle.pop();
    if (ready) return ready;
    return new Promise<TranslatorContext>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      if (this.creating < this.waiters.length) this.build();
    });
  }

  /** Returns a context after a call; a broken one is disposed and replaced. */
  giveBack(context: TranslatorContext): void {
    if (context.broken || this.closed) {
      if (context.broken) this.discarded++;
      this.hooks.destroy(context);
      this.fill();
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve(context);
    else if (this.idle.length < this.size) this.idle.push(context);
    else this.hooks.destroy(context);
  }

  /** Tops the pool up to its size in the background. */
  fill(): void {
    while (!this.closed && this.idle.length + this.creating < this.size) this.build();
  }

  /** Gives up one idle context, so another translator can have its memory. */
  evictOne(): boolean {
    const context = this.idle.shift();
    if (!context) return false;
    this.hooks.destroy(context);
    return true;
  }

  stats(): PoolStats {
    return { warm: this.idle.length, creating: this.creating, created: this.created, discarded: this.discarded };
  }

  close(): void {
    this.closed = true;
    for (const context of this.idle.splice(0)) this.hooks.destroy(context);
    for (const waiter of this.waiters.splice(0)) waiter.reject(new Error('translator was unloaded'));
  }

  private build(): void {
    this.creating++;
    this.hooks.create().then(
      (context) => {
        this.creating--;
        this.created++;
        this.giveBack(context);
      },
      (error: unknown) => {
        this.creating--;
        // Code that loaded once can still fail to start (its top level may
        // time out on a busy machine); everyone waiting gets that error, and
        // the next call tries again.
        for (const waiter of this.waiters.splice(0)) waiter.reject(error);
      },
    );
  }
}
