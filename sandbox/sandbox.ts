/**
 * The sandbox: loaded translator versions, each with its pool of warm
 * contexts, and a cap on contexts across all of them. See index.ts for the
 * public API.
 */
import { createHash } from 'node:crypto';
import { CALL_TIMEOUT_MS, TranslatorContext, type Entries, type Returned } from './context.js';
import { readDecoded, readEncoded, type DownlinkRequest, type Encoded } from './codec.js';
import { TranslatorError } from './errors.js';
import { exampleUplink, firstDifference, type Example, type ExampleResult } from './examples.js';
import { compileFieldMap, type FieldMap, type FieldMapper, type UnmappedPolicy } from './fieldMap.js';
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
  /** Time the examples of one upload check or import may take in all, in ms (default EXAMPLES_BUDGET_MS); the rest are not run. */
  examplesBudgetMs?: number;
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
  /** Maps a device-repository codec's data onto spec fields (see fieldMap.ts). */
  fieldMap?: FieldMap;
  /** What happens to codec data that neither the field map nor the spec names (default `reject`). */
  unmapped?: UnmappedPolicy;
}

export interface DecodeOptions {
  /** The uplink's time, given to decodeUplink as `recvTime` (ISO 8601; default now). */
  receivedAt?: string;
  /** Given to decodeUplink as `variables`: the translator's parameters for this device. */
  parameters?: Record<string, unknown>;
}

export interface Program {
  readonly key: string;
  /** What decodes raw uplinks: `translate` when the code defines it, otherwise the codec's `decodeUplink` through the field map. */
  readonly decoder: 'translate' | 'decodeUplink';
  /** Whether the code defines `encodeDownlink`. */
  readonly encodes: boolean;
  /** Hardware decoder: `translate({encodedData: {hexEncoded, port}})`, or `decodeUplink({bytes, fPort, recvTime, variables})`. */
  decode(encodedData: EncodedData, options?: DecodeOptions): Promise<Translation>;
  /** Chained translator: `translate(iotnode, parameters)`; the iotnode carries earlier output, including this translator's own. */
  chain(iotnode: Record<string, unknown>, parameters?: Record<string, unknown>): Promise<Translation>;
  /** Downlink: `encodeDownlink({data, fPort})`, as hex with its port; TranslatorError kind `codec` for the codec's errors. */
  encode(request: DownlinkRequest): Promise<Encoded>;
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
  /** Calls of loaded translators (decode, chain, encode) since the sandbox was created. */
  calls: number;
  /** Of those, calls that ran past their deadline. */
  timeouts: number;
  /** Of those, calls that failed otherwise (the translator threw, ran out of memory, or returned something the spec refuses). */
  failures: number;
}

/** What a codec gave for one input, as data: its value, or the error it failed with. */
export type Sampled<T> = { ok: T } | { error: string; kind: TranslatorError['kind']; codecErrors: string[] };

/** A codec run on sample inputs, without a spec or field map: what it gives, as it gives it. */
export interface Samples {
  entries: Entries;
  uplinks: Sampled<{ data: Record<string, unknown>; warnings: string[] }>[];
  downlinks: Sampled<Encoded>[];
}

/** Upload checks that run code: which entry points it defines, and how its examples came out. */
export interface Checked {
  entries: Entries;
  examples: ExampleResult[];
}

export interface Sandbox {
  /** Upload check: size, syntax (with line), the top level runs, `translate` or `decodeUplink` is defined. Keeps nothing. */
  compile(code: string): Promise<Entries>;
  /** `compile`, then runs every example in one context (a fresh one after a time-out or memory failure). */
  check(source: Omit<TranslatorSource, 'key'>, examples: Example[], options: { at: string; parameters?: Record<string, unknown>; strike?: Strike }): Promise<Checked>;
  /** Runs a device-repository codec on sample uplinks and downlinks, in one context; for proposing a translator from it. */
  sample(code: string, inputs: { uplinks: { encodedData: EncodedData; receivedAt: string }[]; downlinks: DownlinkRequest[] }, options?: { strike?: Strike }): Promise<Samples>;
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

/** What one version's calls need besides a context: the output check and the field map. */
interface Compiled {
  check: ResultCheck;
  map: FieldMapper;
}

/**
 * Told of every call of a check or a sample that ran into its deadline or cost its context (the caller counts it
 * against whoever pays, `sandbox/budget.ts`); answering false stops the calls still to come, which are not run.
 */
export type Strike = () => boolean;

/** Why the calls after a refused strike did not run. */
const budgetSpent = 'not run: the translators of this user ran into their deadline, or cost a sandbox context, too often within the last minute';

/** Examples stop running after this long in all (at upload and at import); a looping codec costs a second per example. */
export const EXAMPLES_BUDGET_MS = 10_000;

/** Lets the event loop run between two examples, so an upload's or an import's examples never hold ingest up for more than one of them. */
const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Same spec, same text, whatever the key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record).sort().map((k) => `${JSON.stringify(k)}:${canonical(record[k])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'undefined';
}

function compileSource(source: Omit<TranslatorSource, 'key'>): Compiled {
  return { check: createResultCheck(source.spec), map: compileFieldMap(source.fieldMap ?? {}, source.spec, source.unmapped ?? 'reject') };
}

/** Attaches a call's logs to an error raised after the call returned. */
function withLogs<T>(logs: string[], run: () => T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof TranslatorError && error.logs.length === 0 && logs.length > 0) {
      throw new TranslatorError(error.kind, error.message, { ...(error.key === undefined ? {} : { key: error.key }), logs, codecErrors: error.codecErrors });
    }
    throw error;
  }
}

/** `decodeUplink`'s input as the harness reads it (`uplink` in harness.ts): `[fPort, recvTime in ms, [bytes], variables?]`. */
function uplinkInput(encodedData: EncodedData, options: DecodeOptions): string {
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex').join(',');
  const recvTime = options.receivedAt === undefined ? Date.now() : Date.parse(options.receivedAt);
  const variables = options.parameters && hasKeys(options.parameters) ? `,${JSON.stringify(options.parameters)}` : '';
  return `[${Number(encodedData.port)},${recvTime},[${bytes}]${variables}]`;
}

function hasKeys(record: Record<string, unknown>): boolean {
  for (const key in record) if (Object.hasOwn(record, key)) return true;
  return false;
}

/** One raw uplink through one context: `translate`, or `decodeUplink` and the field map. */
function decodeIn(context: TranslatorContext, compiled: Compiled, encodedData: EncodedData, options: DecodeOptions): Translation {
  if (context.entries.translate) {
    const r = context.call('translate', JSON.stringify([{ encodedData }]));
    return compiled.check(r.returned, r.nonFinite, r.logs);
  }
  const r = context.call('decodeUplink', uplinkInput(encodedData, options));
  return withLogs(r.logs, () => {
    const first = r.nonFinite[0];
    if (first) throw new TranslatorError('spec', `data.${first.path}: ${first.value} is not a finite number`, { key: first.path });
    const decoded = readDecoded(r.returned, r.logs);
    const mapped = compiled.map(decoded.data);
    const translation = compiled.check({ result: mapped.result }, [], r.logs);
    if (decoded.warnings.length > 0) translation.warnings = decoded.warnings;
    if (mapped.dropped.length > 0) translation.dropped = mapped.dropped;
    return translation;
  });
}

function encodeIn(context: TranslatorContext, request: DownlinkRequest): Encoded {
  const r: Returned = context.call('encodeDownlink', JSON.stringify([request.fPort === undefined ? { data: request.data } : { data: request.data, fPort: request.fPort }]));
  return readEncoded(r.returned, request, r.logs);
}

function checkRequest(request: DownlinkRequest): void {
  if (typeof request?.data !== 'object' || request.data === null || Array.isArray(request.data)) throw new TypeError('a downlink request needs data as an object');
  if (request.fPort !== undefined && (!Number.isInteger(request.fPort) || request.fPort < 1 || request.fPort > 223)) {
    throw new TypeError('a downlink fPort is a LoRaWAN application port, 1 to 223');
  }
}

/** Runs one example; the outcome is data, never a throw (except host faults). */
function runExample(context: TranslatorContext, compiled: Compiled, example: Example, at: string, parameters: Record<string, unknown>, timedOut: () => void): ExampleResult {
  const options = { receivedAt: example.input.recvTime ?? at, parameters };
  let translation: Translation;
  try {
    translation = decodeIn(context, compiled, exampleUplink(example.input), options);
  } catch (error) {
    if (!(error instanceof TranslatorError)) throw error;
    if (error.kind === 'timeout') timedOut();
    const expected = example.errors;
    if (expected) {
      const got = error.kind === 'codec' ? error.codecErrors : [];
      const passed = error.kind === 'codec' ? firstDifference(expected, got, 'errors') === undefined : expected.every((e) => error.message.includes(e));
      if (passed) return { passed: true, ranAt: at };
      return { passed: false, ranAt: at, problem: `failed with ${error.message}, expected the errors ${JSON.stringify(expected)}` };
    }
    return { passed: false, ranAt: at, problem: `failed (${error.kind}): ${error.message}` };
  }
  const warnings = translation.warnings ? { warnings: translation.warnings } : {};
  if (example.errors) {
    return { passed: false, ranAt: at, output: translation.result, ...warnings, problem: `decoded without errors, expected the errors ${JSON.stringify(example.errors)}` };
  }
  const difference = firstDifference(example.output ?? {}, translation.result, 'output');
  return difference
    ? { passed: false, ranAt: at, output: translation.result, ...warnings, problem: difference }
    : { passed: true, ranAt: at, output: translation.result, ...warnings };
}

export function createSandbox(options: SandboxOptions = {}): Sandbox {
  const poolSize = Math.max(1, options.poolSize ?? 2);
  const maxContexts = Math.max(1, options.maxContexts ?? 64);
  const limits = { timeoutMs: options.timeoutMs ?? CALL_TIMEOUT_MS };
  const examplesBudgetMs = options.examplesBudgetMs ?? EXAMPLES_BUDGET_MS;
  const notRun = `not run: the examples before it took more than ${examplesBudgetMs / 1000} s`;

  // Insertion order doubles as recency: a call moves its entry to the end.
  const entries = new Map<string, Entry>();
  const loading = new Map<string, Promise<Program>>();
  let live = 0;
  let created = 0;
  let discarded = 0;
  let disposeFailures = 0;
  let calls = 0;
  let timeouts = 0;
  let failures = 0;
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

  /** The entry last moved to the end of `entries`; a run of calls of one translator moves it once. */
  let newest: Entry | undefined;

  function touch(key: string, entry: Entry): void {
    if (entry === newest) return;
    entries.delete(key);
    entries.set(key, entry);
    newest = entry;
  }

  function makeProgram(key: string, compiled: Compiled, pool: ContextPool, defined: Entries): Program {
    const run = async <T extends { discarded?: true }>(call: (context: TranslatorContext) => T): Promise<T> => {
      const entry = entries.get(key);
      if (!entry || entry.pool !== pool) throw new Error(`translator ${key} was unloaded`);
      touch(key, entry);
      const taken = pool.take();
      const context = taken instanceof TranslatorContext ? taken : await taken;
      calls++;
      try {
        const out = call(context);
        // A context broken by a call that still returned (promise jobs left pending) is rebuilt all the same.
        if (context.broken) out.discarded = true;
        return out;
      } catch (error) {
        if (error instanceof TranslatorError && error.kind === 'timeout') timeouts++;
        else failures++;
        if (error instanceof TranslatorError && context.broken) error.discarded = true;
        throw error;
      } finally {
        pool.giveBack(context);
      }
    };
    return {
      key,
      decoder: defined.translate ? 'translate' : 'decodeUplink',
      encodes: defined.encodeDownlink,
      decode: (encodedData, decodeOptions = {}) => run((context) => decodeIn(context, compiled, encodedData, decodeOptions)),
      chain: (iotnode, parameters = {}) => {
        if (!defined.translate) return Promise.reject(new TranslatorError('runtime', 'the code defines no translate function to run as a chained translator'));
        const argsJson = JSON.stringify([iotnode, parameters]);
        return run((context) => {
          const r = context.call('translate', argsJson);
          return compiled.check(r.returned, r.nonFinite, r.logs);
        });
      },
      encode: (request) => {
        checkRequest(request);
        if (!defined.encodeDownlink) return Promise.reject(new TranslatorError('codec', 'the code defines no encodeDownlink function'));
        return run((context) => encodeIn(context, request));
      },
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
    const compiled = compileSource(source);
    const fingerprint = createHash('sha256')
      .update(source.code)
      .update('\0')
      .update(canonical(source.spec))
      .update('\0')
      .update(canonical(source.fieldMap ?? {}))
      .update(`\0${source.unmapped ?? 'reject'}`)
      .digest('hex');
    const current = entries.get(source.key);
    if (current?.fingerprint === fingerprint) return current.program;
    const loadingKey = `${source.key}#${fingerprint}`;
    const pending = loading.get(loadingKey);
    if (pending) return pending;

    const promise = (async () => {
      const context = await build(source.code);
      if (disposed) {
        destroy(context);
        throw new Error('the sandbox was disposed');
      }
      unload(source.key);
      const code = source.code;
      const pool = new ContextPool(poolSize, { create: () => build(code), destroy });
      const entry: Entry = { fingerprint, pool, program: makeProgram(source.key, compiled, pool, context.entries) };
      entries.set(source.key, entry);
      newest = entry;
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

  /** A context used once, outside any pool. */
  async function once<T>(code: string, use: (context: TranslatorContext) => Promise<T> | T): Promise<T> {
    assertOpen();
    const context = await TranslatorContext.create(code, limits);
    try {
      return await use(context);
    } finally {
      if (!context.dispose()) disposeFailures++;
    }
  }

  return {
    compile: (code) => once(code, (context) => context.entries),
    async check(source, examples, { at, parameters = {}, strike = () => true }) {
      const compiled = compileSource(source);
      return once(source.code, async (first) => {
        const results: ExampleResult[] = [];
        const started = Date.now();
        let context = first;
        let stopped = false;
        try {
          for (const example of examples) {
            if (stopped || Date.now() - started > examplesBudgetMs) {
              results.push({ passed: false, ranAt: at, problem: stopped ? budgetSpent : notRun });
              continue;
            }
            if (context.broken) {
              if (context !== first && !context.dispose()) disposeFailures++;
              context = await TranslatorContext.create(source.code, limits);
            }
            if (results.length > 0) await turn();
            let struck = false;
            results.push(runExample(context, compiled, example, at, parameters, () => (struck = true)));
            if ((struck || context.broken) && !strike()) stopped = true;
          }
        } finally {
          if (context !== first && !context.dispose()) disposeFailures++;
        }
        return { entries: first.entries, examples: results };
      });
    },
    async sample(code, inputs, { strike = () => true } = {}) {
      return once(code, async (first) => {
        let context = first;
        const started = Date.now();
        let stopped = false;
        const attempt = async <T>(run: (c: TranslatorContext) => T): Promise<Sampled<T>> => {
          // As at upload: a codec that loops costs a second per input, so they stop after the budget.
          if (stopped) return { error: budgetSpent, kind: 'timeout', codecErrors: [] };
          if (Date.now() - started > examplesBudgetMs) return { error: notRun, kind: 'timeout', codecErrors: [] };
          await turn();
          if (context.broken) {
            if (context !== first && !context.dispose()) disposeFailures++;
            context = await TranslatorContext.create(code, limits);
          }
          try {
            return { ok: run(context) };
          } catch (error) {
            if (!(error instanceof TranslatorError)) throw error;
            if ((error.kind === 'timeout' || context.broken) && !strike()) stopped = true;
            return { error: error.message, kind: error.kind, codecErrors: error.codecErrors };
          }
        };
        try {
          const uplinks: Samples['uplinks'] = [];
          for (const { encodedData, receivedAt } of inputs.uplinks) {
            uplinks.push(
              await attempt((c) => {
                if (!c.entries.decodeUplink) throw new TranslatorError('upload', 'the code defines no decodeUplink');
                const r = c.call('decodeUplink', uplinkInput(encodedData, { receivedAt }));
                const first = r.nonFinite[0];
                if (first) throw new TranslatorError('spec', `data.${first.path}: ${first.value} is not a finite number`);
                return readDecoded(r.returned, r.logs);
              }),
            );
          }
          const downlinks: Samples['downlinks'] = [];
          for (const request of inputs.downlinks) {
            downlinks.push(
              await attempt((c) => {
                if (!c.entries.encodeDownlink) throw new TranslatorError('codec', 'the code defines no encodeDownlink function');
                return encodeIn(c, request);
              }),
            );
          }
          return { entries: first.entries, uplinks, downlinks };
        } finally {
          if (context !== first && !context.dispose()) disposeFailures++;
        }
      });
    },
    load,
    get: (key) => entries.get(key)?.program,
    unload,
    stats: () => {
      let reused = reusedByClosedPools;
      for (const entry of entries.values()) reused += entry.pool.stats().reused;
      return { programs: entries.size, contexts: live, created, discarded, reused, disposeFailures, calls, timeouts, failures };
    },
    dispose() {
      disposed = true;
      for (const key of [...entries.keys()]) unload(key);
    },
  };
}
