import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createSandbox, type PoolStats, type Program, type Sandbox, type TranslatorError } from '../../sandbox/index.js';
import { climateHex, climateSensor, rejection } from './fixtures.js';

/**
 * One decoder that behaves on port 1 and misbehaves on the port a test picks,
 * so every escape is followed by a normal uplink on the same program.
 * `calls` is a top-level counter: every call starts from a fresh instance of
 * the code, so it is 1 in every call, warm context or not.
 */
const hostile = `
var calls = 0;

function recurse(n) { return recurse(n + 1) + 1; }
function recurseThroughNative(n) { return [n].map(recurseThroughNative)[0]; }

const attacks = {
  2: () => { while (true) {} },
  3: () => { for (;;) { try { while (true) {} } catch (e) {} } },
  4: () => { const chunks = []; for (;;) chunks.push('x'.repeat(1024 * 1024) + chunks.length); },
  5: () => { let o = {}; for (;;) o = { o }; },
  6: () => recurse(0),
  7: () => recurseThroughNative(0),
  8: () => require('fs').readFileSync('/etc/passwd', 'utf8'),
  9: () => process.exit(1),
  10: () => this.constructor.constructor('return process')().mainModule.require('child_process'),
  11: () => Function('return this')().process.env,
  12: () => setTimeout(() => {}, 0),
  13: () => new Uint8Array(12 * 1024 * 1024).fill(7).length,
  14: () => new Uint8Array(20 * 1024 * 1024).length,
  15: () => { throw 'a string'; },
};

function translate({ encodedData }) {
  calls++;
  const attack = attacks[encodedData.port];
  if (attack) return { result: { outcome: String(attack()) } };
  const bytes = Buffer.from(encodedData.hexEncoded, 'hex');
  return { result: { temperature: bytes.readInt16BE(0) / 100, calls } };
}
`;

const spec = {
  temperature: { type: 'number', unit: '°C', quantity: 'temperature' },
  calls: { type: 'number', unit: '', quantity: 'count' },
  outcome: 'string',
} as const;

const escapes = suite<{ sandbox: Sandbox; program: Program }>('sandbox: escapes are contained');

escapes.before(async (context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
  context.program = await context.sandbox.load({ key: 'hostile@1.0.0', code: hostile, spec });
});
escapes.after((context) => {
  context.sandbox.dispose();
});

const uplink = { hexEncoded: '0866', port: 1 };

/**
 * The next uplink decodes normally. A failure of the engine's limits (time,
 * heap, stack) discards the context it happened in; an error the code throws
 * does not, since the next call starts from the same state anyway.
 */
async function decodesNormally(program: Program, before: PoolStats, discarded: boolean) {
  const out = await program.decode(uplink);
  assert.is(out.result.temperature, 21.5);
  assert.is(out.result.calls, 1, 'a call saw state left by an earlier one');
  assert.is(program.stats().discarded - before.discarded, discarded ? 1 : 0, discarded ? 'the failed context was kept' : 'a context was discarded after a plain throw');
}

async function attack(program: Program, port: number) {
  await program.decode(uplink);
  await program.decode(uplink);
  const before = program.stats();
  const started = performance.now();
  const outcome = program.decode({ hexEncoded: '', port });
  return { outcome, before, elapsed: async () => (await outcome.catch(() => undefined), performance.now() - started) };
}

escapes('given an infinite loop, when called, then it times out in about a second and the next uplink decodes', async ({ program }) => {
  const { outcome, before, elapsed } = await attack(program, 2);
  const error = await rejection(outcome, 'timeout');
  const ms = await elapsed();
  assert.ok(ms >= 900 && ms < 10_000, `took ${ms} ms`);
  assert.match(error.message, 'timed out');
  await decodesNormally(program, before, true);
});

escapes('given a loop that catches the interrupt, when called, then it still times out', async ({ program }) => {
  const { outcome, before } = await attack(program, 3);
  await rejection(outcome, 'timeout');
  await decodesNormally(program, before, true);
});

escapes('given a memory bomb of large strings, when called, then it fails on memory quickly and the host heap is untouched', async ({ program }) => {
  const rssBefore = process.memoryUsage().rss;
  const { outcome, before } = await attack(program, 4);
  // A memory error, not a timeout: the heap cap stopped it before the deadline.
  const error = await rejection(outcome, 'memory');
  assert.match(error.message, 'out of memory');
  assert.ok(process.memoryUsage().rss - rssBefore < 256 * 1024 * 1024, 'the sandbox grew far past its cap');
  await decodesNormally(program, before, true);
});

escapes('given a memory bomb of small objects, when called, then it fails on memory and the next uplink decodes', async ({ program }) => {
  const { outcome, before } = await attack(program, 5);
  await rejection(outcome, 'memory');
  await decodesNormally(program, before, true);
});

escapes('given a translator needing 12 MiB, when called, then it gets it; 20 MiB is refused', async ({ program }) => {
  assert.equal((await program.decode({ hexEncoded: '', port: 13 })).result, { outcome: String(12 * 1024 * 1024) });
  const before = program.stats();
  await rejection(program.decode({ hexEncoded: '', port: 14 }), 'memory');
  await decodesNormally(program, before, true);
});

escapes('given very deep recursion, when called, then it fails as a stack overflow and the next uplink decodes', async ({ program }) => {
  const { outcome, before } = await attack(program, 6);
  const error = await rejection(outcome, 'memory');
  assert.match(error.message, 'stack overflow');
  await decodesNormally(program, before, true);
});

escapes('given deep recursion through native calls, when called, then the engine stops it before the host stack runs out', async ({ program }) => {
  const { outcome, before } = await attack(program, 7);
  await rejection(outcome, 'memory');
  await decodesNormally(program, before, true);
});

escapes('given a call to require, when called, then require does not exist', async ({ program }) => {
  const { outcome, before } = await attack(program, 8);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, "ReferenceError: 'require' is not defined");
  await decodesNormally(program, before, false);
});

escapes('given a call to process.exit, when called, then process does not exist and the host lives on', async ({ program }) => {
  const { outcome, before } = await attack(program, 9);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, "'process' is not defined");
  await decodesNormally(program, before, false);
});

escapes('given the constructor.constructor escape, when called, then the Function it reaches belongs to the sandbox', async ({ program }) => {
  const { outcome, before } = await attack(program, 10);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, "'process' is not defined");
  await decodesNormally(program, before, false);
});

escapes('given Function("return this")(), when called, then it is the sandbox global without host objects', async ({ program }) => {
  const { outcome, before } = await attack(program, 11);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, 'TypeError');
  await decodesNormally(program, before, false);
});

escapes('given setTimeout, when called, then timers do not exist', async ({ program }) => {
  const { outcome, before } = await attack(program, 12);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, "'setTimeout' is not defined");
  await decodesNormally(program, before, false);
});

escapes('given a thrown non-error, when called, then it is a runtime error and the context is kept', async ({ program }) => {
  const { outcome, before } = await attack(program, 15);
  const error = await rejection(outcome, 'runtime');
  assert.match(error.message, 'a string');
  await decodesNormally(program, before, false);
});

escapes('given code that throws null or makes look-alikes of the engine\'s limit errors, when called, then each is a runtime failure and the context is kept', async ({ sandbox }) => {
  const forgeries = [
    'throw null',
    'throw new InternalError("out of memory")',
    'throw InternalError("stack overflow")',
    'throw new InternalError("interrupted")',
    'var e = new Error("interrupted"); e.name = "InternalError"; throw e',
    'throw Reflect.construct(Error, ["out of memory"], InternalError)',
    'class Limit extends InternalError {} throw new Limit("out of memory")',
    'return { get toJSON() { throw new InternalError("out of memory"); } }',
  ];
  const program = await sandbox.load({
    key: 'forger@1.0.0',
    code: `function translate({ encodedData }) {\n${forgeries.map((f, i) => `  if (encodedData.port === ${i}) { ${f} }`).join('\n')}\n  return { result: { outcome: 'fine' } };\n}`,
    spec,
  });
  for (const [port, forgery] of forgeries.entries()) {
    const before = program.stats();
    const error = await program.decode({ hexEncoded: '', port }).then(
      (): TranslatorError => {
        throw new Error(`${forgery} decoded`);
      },
      (e: TranslatorError) => e,
    );
    assert.ok(error.kind === 'runtime' || error.kind === 'result', `${forgery}: ${error.kind} ${error.message}`);
    assert.is(error.discarded, false, forgery);
    assert.equal((await program.decode({ hexEncoded: '', port: 99 })).result, { outcome: 'fine' });
    assert.is(program.stats().discarded, before.discarded, `${forgery}: the context was discarded`);
  }
});

escapes('given a real stack overflow caught and thrown again, when called, then it is the engine\'s memory failure', async ({ sandbox }) => {
  const program = await sandbox.load({ key: 'rethrow@1.0.0', code: 'function translate() { try { (function f() { f(); })(); } catch (e) { throw e; } }', spec });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'memory');
  assert.match(error.message, 'stack overflow');
  assert.is(error.discarded, true);
});

escapes('given failed calls, when counted, then a context that hit a limit was discarded and one that threw was reused', async ({ program, sandbox }) => {
  const before = program.stats();
  await rejection(program.decode({ hexEncoded: '', port: 2 }), 'timeout');
  assert.is(program.stats().discarded, before.discarded + 1);
  assert.ok(sandbox.stats().discarded >= before.discarded + 1);
  await decodesNormally(program, before, true);
  const afterTimeout = program.stats();
  await rejection(program.decode({ hexEncoded: '', port: 15 }), 'runtime');
  assert.is(program.stats().reused, afterTimeout.reused + 1, 'the context that threw served the call');
  await decodesNormally(program, afterTimeout, false);
});

escapes.run();

const reach = suite<{ sandbox: Sandbox }>('sandbox: what translator code can reach');

reach.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
reach.after((context) => {
  context.sandbox.dispose();
});

/** Standard built-ins of the engine plus what the contract adds. */
const allowedGlobals = new Set([
  ...'Error,EvalError,RangeError,ReferenceError,SyntaxError,TypeError,URIError,InternalError,AggregateError'.split(','),
  ...'Array,Object,Function,Iterator,parseInt,parseFloat,isNaN,isFinite,decodeURI,decodeURIComponent'.split(','),
  ...'encodeURI,encodeURIComponent,escape,unescape,Infinity,NaN,undefined,eval,Number,Boolean,String'.split(','),
  ...'Math,Reflect,Symbol,globalThis,BigInt,Date,RegExp,JSON,Proxy,Map,Set,WeakMap,WeakSet,ArrayBuffer'.split(','),
  ...'SharedArrayBuffer,Uint8ClampedArray,Int8Array,Uint8Array,Int16Array,Uint16Array,Int32Array,Uint32Array'.split(','),
  ...'BigInt64Array,BigUint64Array,Float16Array,Float32Array,Float64Array,DataView,Promise,WeakRef'.split(','),
  'FinalizationRegistry',
  '_',
  'Buffer',
  'console',
  'translate',
]);

reach('given the global object, when listed from inside, then it holds only standard built-ins, _, Buffer and console', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'globals@1.0.0',
    code: `function translate() {
      const viaFunction = Function('return this')();
      const viaSloppyThis = (function () { return this; })();
      return { result: {
        names: Object.getOwnPropertyNames(globalThis),
        same: viaFunction === globalThis && viaSloppyThis === globalThis,
        hostNames: ['require', 'process', 'module', 'exports', 'global', 'setTimeout', 'setInterval', 'setImmediate',
          'queueMicrotask', 'fetch', 'XMLHttpRequest', 'WebSocket', 'WebAssembly', 'std', 'os', 'print', 'Deno', 'Bun']
          .filter((name) => typeof globalThis[name] !== 'undefined'),
      } };
    }`,
    spec: { names: 'array', same: 'boolean', hostNames: 'array' },
  });
  const { result } = await program.decode({ hexEncoded: '', port: 1 });
  assert.equal(result.hostNames, []);
  assert.is(result.same, true);
  const unexpected = (result.names as string[]).filter((name) => !allowedGlobals.has(name));
  assert.equal(unexpected, []);
});

reach('given a translator polluting prototypes, when its result returns to the host, then host prototypes stay clean', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'pollute@1.0.0',
    code: `function translate({ encodedData }) {
      Object.prototype.polluted = 'inside';
      switch (encodedData.port) {
        case 1: return { result: JSON.parse('{"__proto__": {"polluted": 1}}') };
        case 2: return { result: { settings: JSON.parse('{"__proto__": {"polluted": 1}}') } };
        case 3: return { result: { settings: { constructor: { prototype: { polluted: 1 } } } } };
        case 4: return { result: { readings: [JSON.parse('{"a": {"__proto__": {"polluted": 1}}}')] } };
        case 5: return JSON.parse('{"__proto__": {"polluted": 1}, "result": {}}');
        default: return { result: { settings: { plain: true } } };
      }
    }`,
    spec: { settings: 'object', readings: 'array' },
  });
  const topLevel = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'spec');
  assert.is(topLevel.key, '__proto__');
  const nested = await rejection(program.decode({ hexEncoded: '', port: 2 }), 'spec');
  assert.match(nested.message, "key '__proto__'");
  const viaConstructor = await rejection(program.decode({ hexEncoded: '', port: 3 }), 'spec');
  assert.match(viaConstructor.message, "key 'constructor'");
  const inArray = await rejection(program.decode({ hexEncoded: '', port: 4 }), 'spec');
  assert.match(inArray.message, '[0].a.__proto__');
  await rejection(program.decode({ hexEncoded: '', port: 5 }), 'result');
  const clean = await program.decode({ hexEncoded: '', port: 6 });
  assert.equal(clean.result, { settings: { plain: true } });
  assert.is(({} as Record<string, unknown>).polluted, undefined);
  assert.is(Object.getPrototypeOf(clean.result), Object.prototype);
  assert.is((clean.result.settings as Record<string, unknown>).polluted, undefined);
});

reach('given two translators, when one changes its built-ins, then the other does not see it', async ({ sandbox }) => {
  const vandal = await sandbox.load({
    key: 'vandal@1.0.0',
    code: `function translate() { Array.prototype.push = null; JSON.stringify = () => '"vandalised"'; globalThis._ = null; return {}; }`,
    spec: {},
  });
  await vandal.decode({ hexEncoded: '', port: 1 });
  const climate = await sandbox.load({ key: 'climate@1.0.0', code: climateSensor.code, spec: climateSensor.spec });
  const out = await climate.decode({ hexEncoded: climateHex(19.25, 40, 3300), port: 1 });
  assert.equal(out.result, { temperature: 19.25, relativeHumidity: 40, batteryVoltage: 3.3 });
});

reach('given a translator overriding JSON.stringify for itself, when it returns, then the captured encoder is still used', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'stringify@1.0.0',
    code: `function translate() { JSON.stringify = () => '{"ok":{"result":{"forged":1}}}'; return { result: { real: 1 } }; }`,
    spec: { real: 'number', forged: 'number' },
  });
  const out = await program.decode({ hexEncoded: '', port: 1 });
  assert.equal(out.result, { real: 1 });
});

reach('given an async translate, when called, then it is rejected as not returning an object', async ({ sandbox }) => {
  const program = await sandbox.load({ key: 'async@1.0.0', code: `async function translate() { return { result: {} }; }`, spec: {} });
  const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'result');
  assert.match(error.message, 'Promise');
});

reach('given an async loop, when called, then the deadline still applies', async ({ sandbox }) => {
  const program = await sandbox.load({
    key: 'async-loop@1.0.0',
    code: `function translate() { (async () => { for (;;) {} })(); return { result: {} }; }`,
    spec: {},
  });
  await rejection(program.decode({ hexEncoded: '', port: 1 }), 'timeout');
});

reach.run();
