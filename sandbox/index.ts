/**
 * Translator sandbox: runs uploaded `translate` code in QuickJS (WebAssembly),
 * one warm context pool per translator version.
 *
 *   const sandbox = createSandbox({ poolSize: 2 });          // composition root; no singletons
 *   await sandbox.compile(code);                              // upload check, throws TranslatorError 'upload' | 'timeout' | 'memory' | 'runtime'
 *   await sandbox.check({ code, spec, fieldMap }, examples, { at });   // upload check: every example's result
 *   checkSpec(spec); checkFieldMap(fieldMap, spec);           // upload checks, SpecIssue[] (empty = valid)
 *   const program = await sandbox.load({ key: 'name@1.2.3', code, spec, fieldMap, unmapped });
 *   const out = await program.decode({ hexEncoded: '0a1b', port: 1 }, { receivedAt, parameters });
 *   const next = await program.chain(iotnode, parameters);
 *   const downlink = await program.encode({ data: { interval: 600 }, fPort: 2 });   // {hexEncoded, fPort, warnings, logs}
 *   // out: { result, additionalDeviceUpdates?, warnings?, dropped?, logs } or a thrown TranslatorError
 *   sandbox.unload('name@1.2.3'); sandbox.dispose();
 *
 * The code defines `translate` (the platform's own form), or a device-
 * repository codec: `decodeUplink({bytes, fPort, recvTime, variables})`
 * returning `{data, warnings?, errors?}` and optionally `encodeDownlink({data,
 * fPort})` returning `{bytes, fPort}`. `translate`, when defined, decodes raw
 * uplinks; otherwise `decodeUplink` does, and its data goes through the
 * field map (fieldMap.ts).
 *
 * Inside the sandbox: the standard built-ins, lodash as `_`, `Buffer` (the
 * `buffer` package) and a capturing `console`; no require, timers, network,
 * file system or host object. Every call runs a fresh instance of the code in
 * a frozen realm, so nothing a call does reaches the next (harness.ts). Each
 * call gets CALL_TIMEOUT_MS and a heap of MEMORY_LIMIT_BYTES; a context whose
 * code timed out or ran out of memory is disposed and never reused. Data
 * crosses only as JSON.
 *
 * Return contract: `{result?: {...}, additionalDeviceUpdates?: [{identifier, result}]}`.
 * Keys with undefined or NaN values are dropped from each `result` (and
 * from objects inside it; NaN in a list, and an infinity anywhere, reject
 * it); every other key must be in the spec with a value of its declared type (`null`
 * never is) and storable content (no NUL, no lone surrogate, at most
 * MAX_RESULT_DEPTH levels), or the whole translation is rejected with kind 'spec'.
 */
export { createSandbox } from './sandbox.js';
export type { Checked, DecodeOptions, Sampled, Samples, EncodedData, Program, Sandbox, SandboxOptions, SandboxStats, TranslatorSource } from './sandbox.js';
export type { Entries } from './context.js';
export { checkFieldMap, compileFieldMap, formatPath, parsePath, UNMAPPED_POLICIES } from './fieldMap.js';
export type { FieldMap, FieldMapEntry, UnmappedPolicy } from './fieldMap.js';
export { MAX_CODEC_MESSAGES, MAX_DOWNLINK_BYTES } from './codec.js';
export type { DownlinkRequest, Encoded } from './codec.js';
export { exampleInputProblem, exampleUplink, firstDifference, MAX_EXAMPLES } from './examples.js';
export { EXAMPLES_BUDGET_MS, type Strike } from './sandbox.js';
export { TimeoutBudget } from './budget.js';
export type { Example, ExampleInput, ExampleResult } from './examples.js';
export { TranslatorError, isTranslatorError } from './errors.js';
export type { TranslatorErrorKind } from './errors.js';
export { checkSpec, declaredType, fieldNameProblem, FIELD_TYPES, MAX_SPEC_FIELDS, UNITS, RESERVED_FIELDS } from './spec.js';
export type { FieldSpec, FieldType, Measurement, SpecIssue, TranslatorSpec, Unit } from './spec.js';
export { contentProblem, createResultCheck, MAX_DEVICE_UPDATES, MAX_RESULT_DEPTH, storableText, textProblem } from './result.js';
export type { DeviceUpdate, Translation } from './result.js';
export { CALL_TIMEOUT_MS, MAX_CODE_BYTES, MAX_RESULT_CHARS, MAX_STACK_BYTES, MEMORY_LIMIT_BYTES } from './context.js';
export { MAX_LOG_CHARS, MAX_LOG_LINE_LENGTH, MAX_LOG_LINES } from './harness.js';
export type { PoolStats } from './pool.js';
