/**
 * Translator sandbox: runs uploaded `translate` code in QuickJS (WebAssembly),
 * one warm context pool per translator version.
 *
 *   const sandbox = createSandbox({ poolSize: 2 });          // composition root; no singletons
 *   await sandbox.compile(code);                              // upload check, throws TranslatorError 'upload' | 'timeout' | 'memory' | 'runtime'
 *   checkSpec(spec);                                          // upload check, SpecIssue[] (empty = valid)
 *   const program = await sandbox.load({ key: 'name@1.2.3', code, spec });
 *   const out = await program.decode({ hexEncoded: '0a1b', port: 1 });
 *   const next = await program.chain(iotnode, parameters);
 *   // out: { result, additionalDeviceUpdates?, logs } or a thrown TranslatorError
 *   sandbox.unload('name@1.2.3'); sandbox.dispose();
 *
 * Inside the sandbox: the standard built-ins, lodash as `_`, `Buffer` (the
 * `buffer` package) and a capturing `console`; no require, timers, network,
 * file system or host object. Each call gets CALL_TIMEOUT_MS and a heap of
 * MEMORY_LIMIT_BYTES; a context whose code timed out, ran out of memory or
 * threw is disposed and never reused. Data crosses only as JSON.
 *
 * Return contract: `{result?: {...}, additionalDeviceUpdates?: [{identifier, result}]}`.
 * Keys with undefined or NaN values are dropped from each `result`; every
 * other key must be in the spec with a value of its declared type (`null`
 * never is), or the whole translation is rejected with kind 'spec'.
 */
export { createSandbox } from './sandbox.js';
export type { EncodedData, Program, Sandbox, SandboxOptions, SandboxStats, TranslatorSource } from './sandbox.js';
export { TranslatorError, isTranslatorError } from './errors.js';
export type { TranslatorErrorKind } from './errors.js';
export { checkSpec, FIELD_TYPES, UNITS, RESERVED_FIELDS } from './spec.js';
export type { FieldSpec, FieldType, Measurement, SpecIssue, TranslatorSpec, Unit } from './spec.js';
export { createResultCheck, MAX_DEVICE_UPDATES } from './result.js';
export type { DeviceUpdate, Translation } from './result.js';
export { CALL_TIMEOUT_MS, MAX_CODE_BYTES, MAX_RESULT_CHARS, MAX_STACK_BYTES, MEMORY_LIMIT_BYTES } from './context.js';
export { MAX_LOG_CHARS, MAX_LOG_LINE_LENGTH, MAX_LOG_LINES } from './harness.js';
export type { PoolStats } from './pool.js';
