/**
 * One warm translator context: its own WebAssembly instance of QuickJS, one
 * runtime, one context with lodash, Buffer, the harness and the uploaded code
 * already evaluated. A context is used by one call at a time (calls are
 * synchronous) and is thrown away after any failure of the code it runs.
 *
 * Why an instance per context rather than many runtimes in one instance:
 * - The prebuilt engine cannot measure allocation sizes ("malloc_usable_size
 *   unavailable"), so `setMemoryLimit` only counts allocations, and a script
 *   pushing 1 MiB strings grows the shared WebAssembly memory to 2 GiB. Here
 *   the instance's memory has a fixed maximum, so the heap limit is real.
 * - Disposing a runtime after an out-of-memory error can abort the whole
 *   WebAssembly module (quickjs-emscripten issues #235, #257, #269). An abort
 *   in a private instance takes nothing else with it.
 */
import {
  newQuickJSWASMModuleFromVariant,
  newVariant,
  RELEASE_SYNC,
  shouldInterruptAfterDeadline,
  type QuickJSContext,
  type QuickJSHandle,
  type QuickJSRuntime,
} from 'quickjs-emscripten';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { TranslatorError, type TranslatorErrorKind } from './errors.js';
import {
  CODE_LINE_OFFSET,
  ENTRY_POINTS,
  HARNESS_SOURCE,
  MAX_LOG_LINE_LENGTH,
  MAX_LOG_LINES,
  implicitGlobals,
  wrapCode,
  type EntryPoint,
  type ThrownError,
} from './harness.js';
import { MEMORY_LIMIT_BYTES } from './limits.js';
import { preludeSource } from './prelude.js';
import { storableText, type NonFinite } from './result.js';
import { isRecord } from './values.js';

export { MEMORY_LIMIT_BYTES } from './limits.js';
/** Well under what the host's own stack can carry: QuickJS frames also use V8 stack for the WebAssembly calls. */
export const MAX_STACK_BYTES = 128 * 1024;
export const CALL_TIMEOUT_MS = 1000;
/** Upload size cap for translator code, in UTF-8 bytes. */
export const MAX_CODE_BYTES = 256 * 1024;
/** Cap on the JSON a call may hand back. */
export const MAX_RESULT_CHARS = 1024 * 1024;

export const CODE_FILENAME = 'translator.js';

const PAGE_BYTES = 64 * 1024;
/** The engine's minimum memory: 5 MiB of C stack, static data, and the start of the heap. */
const ENGINE_INITIAL_PAGES = 256;
/** What the engine and lodash/Buffer/harness take before the translator allocates anything. */
const ENGINE_RESERVED_BYTES = 7 * 1024 * 1024;
const MEMORY_MAX_PAGES = Math.max(ENGINE_INITIAL_PAGES, Math.ceil((ENGINE_RESERVED_BYTES + MEMORY_LIMIT_BYTES) / PAGE_BYTES));
/** Evaluating lodash takes tens of milliseconds; give it room on a loaded machine. */
const PRELUDE_TIMEOUT_MS = 10_000;
/** Reading back logs after a failure is best effort and must not stall the caller. */
const RECOVERY_TIMEOUT_MS = 50;

/** The slice of the WebAssembly global used here (the project's lib settings do not declare it). */
interface WasmApi {
  compile(bytes: Uint8Array): Promise<object>;
  Memory: new (descriptor: { initial: number; maximum: number }) => { buffer: ArrayBuffer };
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

let compiled: Promise<object> | undefined;

/** The engine's WebAssembly, compiled once per process and instantiated per context. */
function engineModule(): Promise<object> {
  compiled ??= (async () => {
    const fromQuickJS = createRequire(createRequire(import.meta.url).resolve('quickjs-emscripten'));
    const bytes = await readFile(fromQuickJS.resolve('@jitl/quickjs-wasmfile-release-sync/wasm'));
    return wasm.compile(bytes);
  })();
  return compiled;
}

/** A successful call, before the output check. */
export interface Returned {
  returned: unknown;
  nonFinite: NonFinite[];
  logs: string[];
}

export interface ContextLimits {
  timeoutMs: number;
}

const LOCATION = new RegExp(`${CODE_FILENAME.replace('.', '\\.')}:(\\d+)(?::(\\d+))?`);

/** The place in the uploaded code; none when the engine pointed into the factory around it. */
function locate(stack: string, offset = CODE_LINE_OFFSET): { line?: number; column?: number } {
  const match = LOCATION.exec(stack);
  if (!match) return {};
  const line = Number(match[1]) - offset;
  if (line < 1) return {};
  return { line, ...(match[2] === undefined ? {} : { column: Number(match[2]) }) };
}

/** Which entry points the uploaded code defines. */
export type Entries = Record<EntryPoint, boolean>;

/** Names on the frozen global object; the same in every context, so read once. */
let globalNames: ReadonlySet<string> | undefined;

function at(location: { line?: number; column?: number }): string {
  if (location.line === undefined) return '';
  return location.column === undefined ? ` (line ${location.line})` : ` (line ${location.line}, column ${location.column})`;
}

const INTERRUPTED: ThrownError = { name: 'InternalError', message: 'interrupted', stack: '' };

/** Heap a context may keep beyond its size when built, from call to call, before it is replaced. */
const RETAINED_LIMIT_BYTES = MEMORY_LIMIT_BYTES / 4;
/** Calls between two measurements of the heap in a context whose memory has not grown past its size at creation. */
const MEASURE_EVERY = 1000;
/** The same once it has (its heap has been near full: what a cache fills there, another call runs short of). */
const MEASURE_EVERY_GROWN = 16;

const MEMORY_USED = /^memory used\s+\d+\s+(\d+)/m;

/**
 * The bytes the engine counts in use in its heap, from its own report (a
 * walk of every object, about 160 µs); undefined when it cannot say.
 */
function heapInUse(runtime: QuickJSRuntime): number | undefined {
  try {
    const match = MEMORY_USED.exec(runtime.dumpMemoryUsage());
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether the heap came to its limit in a run: the engine's memory grew
 * during it (it grows only past its earlier peak), or is now close to its
 * maximum. The evidence for a `null` thrown in that run being the engine's
 * out-of-memory failure rather than the code's own `throw null`.
 */
function heapFilled(memory: { buffer: ArrayBuffer }, before: number): boolean {
  const now = memory.buffer.byteLength;
  return now > before || now >= MEMORY_MAX_PAGES * PAGE_BYTES * 0.9;
}

/**
 * Whether a run that began at `started` took longer than its deadline. The
 * engine checks the deadline only between steps of JavaScript, so a native
 * method's long loop can end after it without being interrupted: it timed
 * out all the same, whatever it returned.
 */
function overran(started: number, timeoutMs: number): boolean {
  return Date.now() - started > timeoutMs;
}

/**
 * Maps a failure to the error kinds callers log. The kinds with weight (a
 * time-out, a memory failure: the context is discarded and the device takes a
 * strike) come from facts, never from what the code threw: a time-out only
 * from the host's own deadline (`timedOut`), a memory failure only from the
 * engine (`thrown.engine`: the harness saw the engine raise it, or it failed
 * outside the code's reach; `heapFull`: the heap grew to its limit in the call,
 * for the `null` the engine throws when even its error cannot be allocated).
 * An `InternalError('out of memory')` or a `throw null` of the code's own is a
 * runtime failure like any throw.
 */
function classify(thrown: ThrownError, timedOut: boolean, logs: string[], timeoutMs: number, heapFull = false): TranslatorError {
  if (timedOut) {
    return new TranslatorError('timeout', `timed out: the code did not finish within ${timeoutMs} ms`, { logs });
  }
  const location = locate(thrown.stack);
  if (thrown.engine === true && thrown.name === 'InternalError' && /out of memory/.test(thrown.message)) {
    return new TranslatorError('memory', `out of memory: the translator exceeded its ${MEMORY_LIMIT_BYTES / 1024 / 1024} MiB heap${at(location)}`, { ...location, logs });
  }
  if (thrown.name === 'Thrown value' && thrown.message === 'null' && (heapFull || thrown.engine === true)) {
    return new TranslatorError('memory', `out of memory: the translator exceeded its ${MEMORY_LIMIT_BYTES / 1024 / 1024} MiB heap (the engine threw null)`, { logs });
  }
  if (thrown.engine === true && thrown.name === 'InternalError' && /stack overflow/.test(thrown.message)) {
    return new TranslatorError('memory', `stack overflow: recursion too deep${at(location)}`, { ...location, logs });
  }
  const message = `${thrown.name}: ${thrown.message}`.slice(0, 2000);
  return new TranslatorError('runtime', `${message}${at(location)}`, { ...location, logs });
}

function asThrown(value: unknown): ThrownError {
  if (!isRecord(value)) return { name: 'Error', message: String(value), stack: '' };
  return {
    name: typeof value.name === 'string' ? value.name : 'Error',
    message: typeof value.message === 'string' ? value.message : String(value.message),
    stack: typeof value.stack === 'string' ? value.stack : '',
    ...(value.engine === true ? { engine: true } : {}),
  };
}

/** Reads an error the engine handed back; dumping can run translator code (getters), so it may fail. */
function describeHandle(context: QuickJSContext, handle: QuickJSHandle): ThrownError {
  try {
    return asThrown(context.dump(handle));
  } catch {
    return { name: 'Error', message: 'an error that could not be described', stack: '' };
  }
}

/** Logs come from the sandbox; keep the host's own bounds on them. */
function asLogs(value: unknown): string[] {
  if (!Array.isArray(value)) return [];
  return value.slice(0, MAX_LOG_LINES + 1).map((line) => storableText(String(line).slice(0, MAX_LOG_LINE_LENGTH + 1)));
}

function asNonFinite(value: unknown): NonFinite[] {
  if (!Array.isArray(value)) return [];
  return value.filter(isRecord).map((entry) => ({ path: String(entry.path), value: String(entry.value) }));
}

/**
 * Frees a handle or a runtime without letting a dead engine throw at the
 * caller. False when freeing failed: the engine aborts when a runtime is freed
 * while objects are still referenced (a leaked handle), and that is worth
 * counting even though the instance, and whatever it held, is dropped anyway.
 */
function release(thing: { alive: boolean; dispose(): void } | undefined): boolean {
  try {
    if (thing?.alive) thing.dispose();
    return true;
  } catch {
    return false;
  }
}

export class TranslatorContext {
  private timedOut = false;
  private failed = false;
  private served = 0;
  /** Calls since the heap was last measured (see `keepsMemory`). */
  private unmeasured = 0;
  /** The heap in use and the engine's memory size once the context was built, before any call. */
  private baseline = { used: 0, size: 0 };

  private constructor(
    private readonly runtime: QuickJSRuntime,
    /** The context's own WebAssembly memory: it grows only when the heap needs more, and never shrinks. */
    private readonly memory: { buffer: ArrayBuffer },
    private readonly context: QuickJSContext,
    private readonly harness: QuickJSHandle,
    private readonly functions: Record<EntryPoint, QuickJSHandle>,
    private readonly logsFn: QuickJSHandle,
    private readonly limits: ContextLimits,
    /** The entry points the code defined when its top level first ran. */
    readonly entries: Entries,
  ) {}

  /** True once the context ran into a failure; it must then be disposed, never reused. */
  get broken(): boolean {
    return this.failed;
  }

  /** Calls this context has taken so far (a lent context with calls > 0 is a reused warm one). */
  get calls(): number {
    return this.served;
  }

  /**
   * Builds a context for `code`. Throws TranslatorError for problems in the
   * code (kind `upload` for size, syntax and no entry point; the run time
   * kinds when its top level times out, runs out of memory or throws).
   */
  static async create(code: string, limits: ContextLimits): Promise<TranslatorContext> {
    if (Buffer.byteLength(code, 'utf8') > MAX_CODE_BYTES) {
      throw new TranslatorError('upload', `code is larger than ${MAX_CODE_BYTES / 1024} KiB`);
    }
    const memory = new wasm.Memory({ initial: ENGINE_INITIAL_PAGES, maximum: MEMORY_MAX_PAGES });
    const quickjs = await newQuickJSWASMModuleFromVariant(newVariant(RELEASE_SYNC, { wasmModule: await engineModule(), wasmMemory: memory }));
    const runtime = quickjs.newRuntime();
    runtime.setMemoryLimit(MEMORY_LIMIT_BYTES);
    runtime.setMaxStackSize(MAX_STACK_BYTES);
    const context = runtime.newContext();
    const handles: QuickJSHandle[] = [];
    /** What the engine was doing, to tell a failure of the host's own stack in compiling the code from one in running it. */
    let phase: 'prelude' | 'compile' | 'run' = 'prelude';
    const abandon = () => {
      handles.forEach(release);
      release(context);
      release(runtime);
    };
    try {
      const timedOut = { value: false };
      const arm = (ms: number) => {
        const due = shouldInterruptAfterDeadline(Date.now() + ms);
        timedOut.value = false;
        runtime.setInterruptHandler((rt) => (timedOut.value = due(rt) === true));
      };
      const evaluate = (source: string, filename: string, compileOnly = false): QuickJSHandle | ThrownError => {
        const outcome = context.evalCode(source, filename, { type: 'global', compileOnly });
        if (outcome.error) {
          const thrown = describeHandle(context, outcome.error);
          outcome.error.dispose();
          return thrown;
        }
        return outcome.value;
      };
      const isThrown = (value: QuickJSHandle | ThrownError): value is ThrownError => !('alive' in value);
      const callString = (fn: QuickJSHandle, arg?: QuickJSHandle): string | ThrownError => {
        const outcome = context.callFunction(fn, context.undefined, ...(arg ? [arg] : []));
        if (outcome.error) {
          const thrown = describeHandle(context, outcome.error);
          outcome.error.dispose();
          return thrown;
        }
        const text = context.getString(outcome.value);
        outcome.value.dispose();
        return text;
      };

      arm(PRELUDE_TIMEOUT_MS);
      phase = 'prelude';
      const prelude = evaluate(preludeSource(), 'prelude.js');
      if (isThrown(prelude)) throw new Error(`sandbox prelude failed: ${prelude.name}: ${prelude.message}`);
      prelude.dispose();
      const harness = evaluate(HARNESS_SOURCE, 'harness.js');
      if (isThrown(harness)) throw new Error(`sandbox harness failed: ${harness.name}: ${harness.message}`);
      handles.push(harness);
      const functions = {} as Record<EntryPoint, QuickJSHandle>;
      functions.translate = context.getProp(harness, 'call');
      handles.push(functions.translate);
      functions.decodeUplink = context.getProp(harness, 'decodeUplink');
      handles.push(functions.decodeUplink);
      functions.encodeDownlink = context.getProp(harness, 'encodeDownlink');
      handles.push(functions.encodeDownlink);
      const logsFn = context.getProp(harness, 'logs');
      handles.push(logsFn);

      if (!globalNames) {
        const globalsFn = context.getProp(harness, 'globals');
        const listed = callString(globalsFn);
        globalsFn.dispose();
        if (typeof listed !== 'string') throw new Error(`sandbox harness failed: ${listed.name}: ${listed.message}`);
        globalNames = new Set(JSON.parse(listed) as string[]);
      }
      // The code must be a whole program on its own before it is pasted
      // into the factory's body (wrapCode): code that is not, such as
      // `})(); })\nlet kept = [];\n(function () { return (function () {`,
      // would close the factory early and keep its state outside it, across
      // calls and devices. The engine's own parser decides, compiling the
      // code alone as a script: then nothing in it can close what surrounds
      // it. (Its Function constructor pastes a body between braces too.)
      arm(limits.timeoutMs);
      phase = 'compile';
      const alone = evaluate(code, CODE_FILENAME, true);
      if (isThrown(alone)) {
        const location = locate(alone.stack, 0);
        if (alone.name === 'SyntaxError' && /^return not in a function/.test(alone.message)) {
          throw new TranslatorError('upload', `the code returned from its top level; it must define its functions and not return${at(location)}`, location);
        }
        throw new TranslatorError('upload', `${alone.name}: ${alone.message}${at(location)}`, location);
      }
      alone.dispose();
      const wrapped = wrapCode(code, implicitGlobals(code, globalNames));

      // Compiling first tells syntax errors apart from a SyntaxError the
      // code's top level throws at run time.
      const compiledCode = evaluate(wrapped, CODE_FILENAME, true);
      if (isThrown(compiledCode)) {
        const location = locate(compiledCode.stack);
        throw new TranslatorError('upload', `${compiledCode.name}: ${compiledCode.message}${at(location)}`, location);
      }
      compiledCode.dispose();

      const factory = evaluate(wrapped, CODE_FILENAME);
      if (isThrown(factory)) throw classify({ ...factory, engine: true }, timedOut.value, [], limits.timeoutMs);

      // The first run of the top level: it must finish, and define an entry point.
      arm(limits.timeoutMs);
      const installFn = context.getProp(harness, 'install');
      phase = 'run';
      const started = Date.now();
      const heapBefore = memory.buffer.byteLength;
      const installed = callString(installFn, factory);
      const late = timedOut.value || overran(started, limits.timeoutMs);
      installFn.dispose();
      factory.dispose();
      // What fails outside the harness's catch is the engine's (all the code runs inside it).
      if (typeof installed !== 'string') throw classify({ ...installed, engine: true }, late, [], limits.timeoutMs);
      if (late) throw classify(INTERRUPTED, true, [], limits.timeoutMs);
      const outcome = JSON.parse(installed) as { entries?: boolean[]; threw?: unknown; logs?: unknown };
      if (outcome.threw !== undefined) throw classify(asThrown(outcome.threw), false, asLogs(outcome.logs), limits.timeoutMs, heapFilled(memory, heapBefore));
      if (runtime.hasPendingJob()) {
        throw new TranslatorError('upload', 'the code leaves promise jobs pending; promises never settle here, its functions must be synchronous');
      }
      const defined = outcome.entries ?? [];
      const entries = Object.fromEntries(ENTRY_POINTS.map((name, i) => [name, defined[i] === true])) as Entries;
      if (!entries.translate && !entries.decodeUplink) {
        throw new TranslatorError('upload', 'the code defines no function named translate or decodeUplink');
      }

      const built = new TranslatorContext(runtime, memory, context, harness, functions, logsFn, limits, entries);
      built.baseline = { used: heapInUse(runtime) ?? 0, size: memory.buffer.byteLength };
      return built;
    } catch (error) {
      abandon();
      if (error instanceof TranslatorError || phase === 'prelude') throw error;
      // The engine's parser and interpreter recurse on the host's own stack
      // too, below the limit the engine keeps: code nested deeply enough
      // (`[[[[…` 100,000 levels) runs the host out of stack inside the engine,
      // which is left unusable. That is the code's problem, answered as such.
      const message = error instanceof Error ? error.message : String(error);
      if (phase === 'compile') throw new TranslatorError('upload', `the code nests too deeply to be compiled (the engine failed: ${message})`);
      throw new TranslatorError(/call stack/i.test(message) ? 'memory' : 'runtime', `the sandbox engine failed running the code's top level: ${message}`);
    }
  }

  /**
   * Calls an entry point with its JSON-encoded input (for `translate` the
   * argument list, for `decodeUplink` the list `uplink` in harness.ts reads).
   * Returns the raw return value; throws TranslatorError for
   * failures of the code, or for return values that cannot cross. A time-out,
   * a memory failure or an engine fault breaks the context; a throw does not,
   * since every call starts from the same state.
   */
  call(entry: EntryPoint, json: string): Returned {
    if (this.failed) throw new Error('a broken translator context was reused');
    this.served++;
    const { context } = this;
    let text: string;
    let heapBefore = 0;
    const arg = context.newString(json);
    try {
      this.arm(this.limits.timeoutMs);
      const started = Date.now();
      heapBefore = this.memory.buffer.byteLength;
      const outcome = context.callFunction(this.functions[entry], context.undefined, arg);
      const late = this.timedOut || overran(started, this.limits.timeoutMs);
      if (outcome.error) {
        // The harness catches whatever the code throws, so what fails outside
        // it is the engine's (the deadline's interrupt, or a limit hit while
        // the harness itself worked).
        this.failed = true;
        const timedOut = late;
        const thrown = timedOut ? INTERRUPTED : this.recover(() => describeHandle(context, outcome.error));
        release(outcome.error);
        throw classify({ ...(thrown ?? { name: 'Error', message: 'the engine failed', stack: '' }), engine: true }, timedOut, this.recoverLogs(), this.limits.timeoutMs);
      }
      text = context.getString(outcome.value);
      outcome.value.dispose();
      // An async function turns even the deadline's uncatchable interrupt
      // into a rejected promise, so a call can return after timing out; and
      // a native loop runs past the deadline without the engine checking it
      // (guards.ts bounds the ones known). Either way the call timed out.
      if (late) {
        this.failed = true;
        throw classify(INTERRUPTED, true, this.logsOf(text), this.limits.timeoutMs);
      }
      // Promise jobs never run here; a context holding some would carry them
      // into the next call, so it is replaced (this result still stands).
      if (this.runtime.hasPendingJob()) this.failed = true;
    } catch (error) {
      if (error instanceof TranslatorError) throw error;
      // A trap inside the engine itself (e.g. the host's stack ran out).
      this.failed = true;
      const message = error instanceof Error ? error.message : String(error);
      const kind: TranslatorErrorKind = /call stack/i.test(message) ? 'memory' : 'runtime';
      throw new TranslatorError(kind, `the sandbox engine failed: ${message}`);
    } finally {
      release(arg);
    }
    try {
      return this.open(entry, text, heapBefore);
    } finally {
      // Whatever the call gave, a context that keeps what its calls left behind is replaced.
      if (!this.failed && this.keepsMemory(heapBefore)) this.failed = true;
    }
  }

  /**
   * Whether the heap holds more than RETAINED_LIMIT_BYTES beyond what it held
   * when the context was built. A frozen realm keeps nothing of a call, but
   * the libraries' own caches do (lodash memoizes every string path it
   * parses, `_.get(obj, 'a.b')`), so one device's uplinks could fill the heap
   * another device's call then runs out of. Measuring walks the whole heap
   * (about 160 µs), so it is done after a call in which the engine's memory
   * grew, every MEASURE_EVERY_GROWN calls once it has grown past its size at
   * creation, and every MEASURE_EVERY calls otherwise.
   */
  private keepsMemory(heapBefore: number): boolean {
    const size = this.memory.buffer.byteLength;
    if (size <= heapBefore && ++this.unmeasured < (size > this.baseline.size ? MEASURE_EVERY_GROWN : MEASURE_EVERY)) return false;
    this.unmeasured = 0;
    const used = heapInUse(this.runtime);
    return used === undefined || used - this.baseline.used > RETAINED_LIMIT_BYTES;
  }

  private open(entry: EntryPoint, json: string, heapBefore: number): Returned {
    if (json.length > MAX_RESULT_CHARS) {
      throw new TranslatorError('result', `the return value is larger than ${MAX_RESULT_CHARS / 1024} KiB as JSON`);
    }
    let envelope: unknown;
    try {
      envelope = JSON.parse(json);
    } catch {
      this.failed = true;
      throw new TranslatorError('runtime', 'the sandbox returned malformed data');
    }
    if (!isRecord(envelope)) {
      this.failed = true;
      throw new TranslatorError('runtime', 'the sandbox returned malformed data');
    }
    const logs = asLogs(envelope.logs);
    if ('ok' in envelope) return { returned: envelope.ok, nonFinite: asNonFinite(envelope.nonFinite), logs };
    if ('threw' in envelope) {
      const error = classify(asThrown(envelope.threw), false, logs, this.limits.timeoutMs, heapFilled(this.memory, heapBefore));
      // The engine's own limits leave it at the edge of its heap or stack; start afresh.
      if (error.kind !== 'runtime') this.failed = true;
      throw error;
    }
    if ('returnedType' in envelope) {
      const shape = entry === 'translate' ? '{result: {...}} or {}' : entry === 'decodeUplink' ? '{data: {...}}' : '{bytes: [...], fPort}';
      throw new TranslatorError('result', `${entry} must return an object like ${shape}, it returned ${String(envelope.returnedType)}`, { logs });
    }
    if ('unserializable' in envelope) {
      const thrown = asThrown(envelope.unserializable);
      // Encoding a large result can exhaust the heap: that is the engine's failure, not the value's.
      const failure = classify(thrown, false, logs, this.limits.timeoutMs, heapFilled(this.memory, heapBefore));
      if (failure.kind === 'memory') {
        this.failed = true;
        throw failure;
      }
      throw new TranslatorError('result', `the return value cannot be encoded as JSON: ${thrown.name}: ${thrown.message}`, { logs });
    }
    if ('missing' in envelope) {
      throw new TranslatorError('runtime', `the code did not define ${entry} in this call`, { logs });
    }
    this.failed = true;
    throw new TranslatorError('runtime', 'the sandbox returned malformed data');
  }

  private logsOf(json: string): string[] {
    try {
      const envelope: unknown = JSON.parse(json);
      return isRecord(envelope) ? asLogs(envelope.logs) : [];
    } catch {
      return [];
    }
  }

  private arm(ms: number): void {
    const due = shouldInterruptAfterDeadline(Date.now() + ms);
    this.timedOut = false;
    this.runtime.setInterruptHandler((rt) => (this.timedOut = due(rt) === true));
  }

  /** Runs a read-back on a failed context under a short deadline; undefined if that fails too. */
  private recover<T>(read: () => T): T | undefined {
    try {
      this.arm(RECOVERY_TIMEOUT_MS);
      return read();
    } catch {
      return undefined;
    }
  }

  /** The logs of a call that died before it could return them. */
  private recoverLogs(): string[] {
    return (
      this.recover(() => {
        const { context } = this;
        const outcome = context.callFunction(this.logsFn, context.undefined);
        if (outcome.error) {
          outcome.error.dispose();
          return [];
        }
        const json = context.getString(outcome.value);
        outcome.value.dispose();
        return asLogs(JSON.parse(json));
      }) ?? []
    );
  }

  /** Frees the context; false when the engine could not free everything (a leaked handle). */
  dispose(): boolean {
    this.failed = true;
    const { translate, decodeUplink, encodeDownlink } = this.functions;
    const freed = [this.logsFn, translate, decodeUplink, encodeDownlink, this.harness, this.context, this.runtime].map(release);
    return freed.every(Boolean);
  }
}
