/**
 * The sandbox: loaded translator versions, each with its pool of warm
 * contexts, and a cap on contexts across all of them. See index.ts for the
 * public API.
 */
import { createHash } from 'node:crypto';
import { CALL_TIMEOUT_MS, TranslatorContext, type Returned } from './context.js';
import { TranslatorError } from './errors.js';
import { ContextPool, type PoolStats } from './pool.js';
import { createResultCheck, type ResultCheck, type Translation } from './result.js';
import { checkSpec, type TranslatorSpec } from './spec.js';

export interface SandboxOptions {
  /** Warm contexts kept per loaded translator version (default 2). */
  poolSize?: number;
  /** Contexts across all versions before idle ones of the least recently used are dropped (default 64). */
  maxContexts?: number;
  /** Deadline per call and for the code's top level, in ms (default 1000). */
  timeoutMs?: number;
}

/** The raw uplink a hardware decoder receives. */
export interface EncodedData {
  hexEncoded: string;
  port: number;
}

export interface TranslatorSource {
  /** Identifies the version: a translator id, or `name@version`. */
  key: string;
  code: string;
  spec: TranslatorSpec;
}

export interface Program {
  readonly key: string;
  /** Hardware decoder: `translate({encodedData: {hexEncoded, port}})`. */
  decode(encodedData: EncodedData): Promise<Translation>;
  /** Chained translator: `translate(iotnode, parameters)`; the iotnode carries earlier output, including this translator's own. */
  chain(iotnode: Record<string, unknown>, parameters?: Record<string, unknown>): Promise<Translation>;
  stats(): PoolStats;
}

export interface SandboxStats {
  programs: number;
  /** Contexts alive, warm or being built. */
  contexts: number;
  created: number;
  discarded: number;
  /** Calls served by a warm context that had already served one, across every translator loaded so far. */
  reused: number;
  /** Context disposals where the engine could not free everything (a leaked handle); should stay 0. */
  disposeFailures: number;
}

export interface Sandbox {
  /** Upload check: size, syntax (with line), the top level runs, `translate` is defined. Keeps nothing. */
  compile(code: string): Promise<void>;
  /** Validates spec and code, keeps warm contexts ready. Loading the same key and content again is a no-op; new content replaces the old. */
  load(source: TranslatorSource): Promise<Program>;
  get(key: string): Program | undefined;
  unload(key: string): void;
  stats(): SandboxStats;
  dispose(): void;
}

interface Entry {
  fingerprint: string;
  pool: ContextPool;
  program: Program;
}

/** Same spec, same text, whatever the key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record).sort().map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

export function createSandbox(options: SandboxOptions = {}): Sandbox {
  const poolSize = Math.max(1, options.poolSize ?? 2);
  const maxContexts = Math.max(1, options.maxContexts ?? 64);
  const limits = { timeoutMs: options.timeoutMs ?? CALL_TIMEOUT_MS };

  // Insertion order doubles as recency: a call moves its entry to the end.
  const entries = new Map<string, Entry>();
  const loading = new Map<string, Promise<Program>>();
  let live = 0;
  let created = 0;
  let discarded = 0;
  let disposeFailures = 0;
  /** Reuses counted by pools that were closed since (unloaded or replaced translators). */
  let reusedByClosedPools = 0;
  let disposed = false;

  function assertOpen(): void {
    if (disposed) throw new Error('the sandbox was disposed');
  }

  /** Makes room under maxContexts by dropping idle contexts, least recently used translator first. */
  function makeRoom(): void {
    for (const entry of entries.values()) {
      if (live < maxContexts) return;
      while (live >= maxContexts && entry.pool.evictOne());
    }
  }

  async function build(code: string): Promise<TranslatorContext> {
    makeRoom();
    live++;
    try {
      const context = await TranslatorContext.create(code, limits);
      created++;
      return context;
    } catch (error) {
      live--;
      throw error;
    }
  }

  function destroy(context: TranslatorContext): boolean {
    if (context.broken) discarded++;
    const clean = context.dispose();
    if (!clean) disposeFailures++;
    live--;
    return clean;
  }

  function touch(key: string, entry: Entry): void {
    entries.delete(key);
    entries.set(key, entry);
  }

  function makeProgram(key: string, check: ResultCheck, pool: ContextPool): Program {
    const run = async (argsJson: string): Promise<Translation> => {
      const entry = entries.get(key);
      if (!entry || entry.pool !== pool) throw new Error(`translator ${key} was unloaded`);
      touch(key, entry);
      const taken = pool.take();
      const context = taken instanceof TranslatorContext ? taken : await taken;
      let returned: Returned;
      try {
        returned = context.call(argsJson);
      } finally {
        pool.giveBack(context);
      }
      return check(returned.returned, returned.nonFinite, returned.logs);
    };
    return {
      key,
      decode: (encodedData) => run(JSON.stringify([{ encodedData }])),
      chain: (iotnode, parameters = {}) => run(JSON.stringify([iotnode, parameters])),
      stats: () => pool.stats(),
    };
  }

  async function load(source: TranslatorSource): Promise<Program> {
    assertOpen();
    const issues = checkSpec(source.spec);
    const first = issues[0];
    if (first) {
      const message = issues.map((i) => (i.field ? `spec field '${i.field}' ${i.problem}` : i.problem)).join('; ');
      throw new TranslatorError('upload', message, first.field ? { key: first.field } : {});
    }
    const fingerprint = createHash('sha256').update(source.code).update('\0').update(canonical(source.spec)).digest('hex');
    const current = entries.get(source.key);
    if (current?.fingerprint === fingerprint) return current.program;
    const pending = loading.get(`${source.key}#${fingerprint}`);
    if (pending) return pending;

    const loadingKey = `${source.key}#${fingerprint}`;
    const promise = (async () => {
      const context = await build(source.code);
      if (disposed) {
        destroy(context);
        throw new Error('the sandbox was disposed');
      }
      unload(source.key);
      const code = source.code;
      const pool = new ContextPool(poolSize, { create: () => build(code), destroy });
      const entry: Entry = { fingerprint, pool, program: makeProgram(source.key, createResultCheck(source.spec), pool) };
      entries.set(source.key, entry);
      pool.adopt(context);
      pool.fill();
      return entry.program;
    })();
    loading.set(loadingKey, promise);
    try {
      return await promise;
    } finally {
      loading.delete(loadingKey);
    }
  }

  function unload(key: string): void {
    const entry = entries.get(key);
    if (!entry) return;
    entries.delete(key);
    entry.pool.close();
    reusedByClosedPools += entry.pool.stats().reused;
  }

  return {
    async compile(code) {
      assertOpen();
      const context = await TranslatorContext.create(code, limits);
      if (!context.dispose()) disposeFailures++;
    },
    load,
    get: (key) => entries.get(key)?.program,
    unload,
    stats: () => {
      let reused = reusedByClosedPools;
      for (const entry of entries.values()) reused += entry.pool.stats().reused;
      return { programs: entries.size, contexts: live, created, discarded, reused, disposeFailures };
    },
    dispose() {
      disposed = true;
      for (const key of [...entries.keys()]) unload(key);
    },
  };
}
