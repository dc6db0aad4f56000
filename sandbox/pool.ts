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
  /** Calls served by a context that had already served one (a warm context reused, not rebuilt). */
  reused: number;
  /** Disposals where the engine could not free everything (a leaked handle); should stay 0. */
  disposeFailures: number;
}

interface Waiter {
  resolve(context: TranslatorContext): void;
  reject(error: unknown): void;
}

export interface PoolHooks {
  /** Builds one context; also accounts for it sandbox-wide. */
  create(): Promise<TranslatorContext>;
  /** Disposes one context; also accounts for it sandbox-wide. False when the disposal failed. */
  destroy(context: TranslatorContext): boolean;
}

export class ContextPool {
  private readonly idle: TranslatorContext[] = [];
  private readonly waiters: Waiter[] = [];
  private creating = 0;
  private created = 0;
  private discarded = 0;
  private reused = 0;
  private disposeFailures = 0;
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
    if (ready) return this.lend(ready);
    return new Promise<TranslatorContext>((resolve, reject) => {
      this.waiters.push({ resolve, reject });
      if (this.creating < this.waiters.length) this.build();
    });
  }

  /** Returns a context after a call; a broken one is disposed and replaced. */
  giveBack(context: TranslatorContext): void {
    if (context.broken || this.closed) {
      if (context.broken) this.discarded++;
      this.destroy(context);
      this.fill();
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) waiter.resolve(this.lend(context));
    else if (this.idle.length < this.size) this.idle.push(context);
    else this.destroy(context);
  }

  /** Tops the pool up to its size in the background. */
  fill(): void {
    while (!this.closed && this.idle.length + this.creating < this.size) this.build();
  }

  /** Gives up one idle context, so another translator can have its memory. */
  evictOne(): boolean {
    const context = this.idle.shift();
    if (!context) return false;
    this.destroy(context);
    return true;
  }

  stats(): PoolStats {
    return {
      warm: this.idle.length,
      creating: this.creating,
      created: this.created,
      discarded: this.discarded,
      reused: this.reused,
      disposeFailures: this.disposeFailures,
    };
  }

  close(): void {
    this.closed = true;
    for (const context of this.idle.splice(0)) this.destroy(context);
    for (const waiter of this.waiters.splice(0)) waiter.reject(new Error('translator was unloaded'));
  }

  private lend(context: TranslatorContext): TranslatorContext {
    if (context.calls > 0) this.reused++;
    return context;
  }

  private destroy(context: TranslatorContext): void {
    if (!this.hooks.destroy(context)) this.disposeFailures++;
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
