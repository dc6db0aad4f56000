import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createSandbox, type Program, type Sandbox, type TranslatorSpec } from '../../sandbox/index.js';
import { rejection } from './fixtures.js';

/**
 * Nothing one call does reaches the next: a warm context serves every call of
 * a translator version, for every device that uses it, so state kept between
 * calls would leak from one device (and one owner) to another.
 */
const isolation = suite<{ sandbox: Sandbox }>('sandbox: every call starts from the same state');

isolation.before((context) => {
  // One warm context, so every call below runs in the same one.
  context.sandbox = createSandbox({ poolSize: 1 });
});
isolation.after((context) => {
  context.sandbox.dispose();
});

let versions = 0;
const load = (sandbox: Sandbox, code: string, spec: TranslatorSpec) => sandbox.load({ key: `isolation@1.0.${versions++}`, code, spec });

/** Two calls on the one warm context; the second is the "next device". */
async function twice(program: Program, port = 1) {
  const first = await program.decode({ hexEncoded: '00', port });
  const second = await program.decode({ hexEncoded: '00', port });
  assert.is(program.stats().created, 1, 'both calls ran in the same warm context');
  return [first.result, second.result] as const;
}

isolation('given a translator counting calls in a top-level let, when called twice, then the second call counts from the start again', async ({ sandbox }) => {
  const program = await load(sandbox, `let calls = 0;\nfunction translate() { calls++; return { result: { calls } }; }`, { calls: 'number' });
  assert.equal(await twice(program), [{ calls: 1 }, { calls: 1 }]);
});

isolation('given a translator caching a value on a top-level object, when called twice, then the second call finds the cache empty', async ({ sandbox }) => {
  const program = await load(
    sandbox,
    `var cache = {};\nfunction translate({ encodedData }) { var seen = cache.last; cache.last = encodedData.port; return { result: { seen: String(seen) } }; }`,
    { seen: 'string' },
  );
  assert.equal(await twice(program), [{ seen: 'undefined' }, { seen: 'undefined' }]);
});

isolation('given sloppy code writing globalThis.x, when called twice, then the write does not hold, even within the call', async ({ sandbox }) => {
  const program = await load(
    sandbox,
    `function translate() { var before = typeof globalThis.x; globalThis.x = 'kept'; return { result: { before: before, after: typeof globalThis.x } }; }`,
    { before: 'string', after: 'string' },
  );
  assert.equal(await twice(program), [{ before: 'undefined', after: 'undefined' }, { before: 'undefined', after: 'undefined' }]);
});

isolation('given strict code writing globalThis.x, when called, then it fails as a runtime error naming the write, and the next call decodes', async ({ sandbox }) => {
  const program = await load(
    sandbox,
    `'use strict';\nfunction translate({ encodedData }) {\n  if (encodedData.port === 2) globalThis.x = 1;\n  return { result: { ok: true } };\n}`,
    { ok: 'boolean' },
  );
  const error = await rejection(program.decode({ hexEncoded: '', port: 2 }), 'runtime');
  assert.match(error.message, 'TypeError');
  assert.is(error.line, 3);
  assert.equal((await program.decode({ hexEncoded: '', port: 1 })).result, { ok: true });
});

isolation('given a translator changing _ and Array.prototype, when called twice, then neither change holds', async ({ sandbox }) => {
  const program = await load(
    sandbox,
    `function translate() {
      var seen = { round: _.round(1.26, 1), sum: typeof [].sum, mixed: typeof _.leak, polluted: typeof ({}).polluted };
      try { _.round = function () { return 0; }; } catch (e) {}
      try { _.mixin({ leak: function () {} }); } catch (e) {}
      try { Array.prototype.sum = function () { return 0; }; } catch (e) {}
      try { Object.prototype.polluted = true; } catch (e) {}
      return { result: seen };
    }`,
    { round: 'number', sum: 'string', mixed: 'string', polluted: 'string' },
  );
  const expected = { round: 1.3, sum: 'undefined', mixed: 'undefined', polluted: 'undefined' };
  assert.equal(await twice(program), [expected, expected]);
});

isolation('given a translator writing to intrinsics reachable only through instances, when called twice, then nothing holds', async ({ sandbox }) => {
  const program = await load(
    sandbox,
    `function translate() {
      var iteratorProto = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));
      var generatorProto = Object.getPrototypeOf(function* () {}).prototype;
      var seen = String(iteratorProto.leak) + ',' + String(generatorProto.leak) + ',' + String(Buffer.prototype.leak) + ',' + String(console.leak);
      [iteratorProto, generatorProto, Buffer.prototype, console].forEach(function (o) { try { o.leak = 1; } catch (e) {} });
      try { Object.defineProperty(globalThis, 'hidden', { value: 1, configurable: false }); } catch (e) {}
      try { Object.setPrototypeOf(globalThis, { viaProto: 1 }); } catch (e) {}
      return { result: { seen: seen, hidden: typeof hidden, viaProto: typeof viaProto } };
    }`,
    { seen: 'string', hidden: 'string', viaProto: 'string' },
  );
  const expected = { seen: 'undefined,undefined,undefined,undefined', hidden: 'undefined', viaProto: 'undefined' };
  assert.equal(await twice(program), [expected, expected]);
});

isolation('given a codec using an undeclared loop variable (sloppy implicit global), when called twice, then it works within a call and starts over in the next', async ({ sandbox }) => {
  // As in real vendor codecs: `for (i = 0; …)` without a declaration.
  const program = await sandbox.load({
    key: `isolation@1.0.${versions++}`,
    code: `function decodeUplink(input) {
      var before = typeof total;
      total = 0;
      for (i = 0; i < input.bytes.length; i++) total += input.bytes[i];
      return { data: { total: total, before: before, index: i } };
    }`,
    spec: { total: 'number', before: 'string', index: 'number' },
  });
  const first = await program.decode({ hexEncoded: '010203', port: 1 });
  const second = await program.decode({ hexEncoded: '0a', port: 1 });
  assert.equal(first.result, { total: 6, before: 'undefined', index: 3 });
  assert.equal(second.result, { total: 10, before: 'undefined', index: 1 });
});

isolation('given _.uniqueId, when called in two calls, then each call counts from 1', async ({ sandbox }) => {
  const program = await load(sandbox, `function translate() { return { result: { ids: [_.uniqueId('a'), _.uniqueId()] } }; }`, { ids: 'array' });
  assert.equal(await twice(program), [{ ids: ['a1', '2'] }, { ids: ['a1', '2'] }]);
});

isolation('given code assigning names on its own objects that built-ins also have, when called, then the assignments work', async ({ sandbox }) => {
  // Frozen prototypes must not turn these everyday assignments into failures.
  const program = await load(
    sandbox,
    `'use strict';
    class FrameError extends Error { constructor(m) { super(m); this.name = 'FrameError'; } }
    function translate() {
      var reading = { value: 4 };
      reading.toString = function () { return 'reading ' + this.value; };
      reading.valueOf = function () { return this.value; };
      reading.constructor = 'plain';
      var e = new FrameError('short');
      var plain = new Error('x');
      plain.message = 'changed';
      return { result: { text: String(reading), sum: reading + 1, name: e.name, shown: String(e), message: plain.message, ctor: typeof reading.constructor } };
    }`,
    { text: 'string', sum: 'number', name: 'string', shown: 'string', message: 'string', ctor: 'string' },
  );
  const { result } = await program.decode({ hexEncoded: '', port: 1 });
  assert.equal(result, { text: 'reading 4', sum: 5, name: 'FrameError', shown: 'FrameError: short', message: 'changed', ctor: 'string' });
  // And the built-ins themselves stay as they were.
  const check = await load(sandbox, `function translate() { return { result: { name: new TypeError('t').name, text: String({}) } }; }`, { name: 'string', text: 'string' });
  assert.equal((await check.decode({ hexEncoded: '', port: 1 })).result, { name: 'TypeError', text: '[object Object]' });
});

isolation('given code whose top level returns, when loaded, then it is refused with the reason and the place', async ({ sandbox }) => {
  const error = await rejection(sandbox.compile(`function translate() { return {}; }\nreturn 5;`), 'upload');
  assert.match(error.message, 'returned from its top level');
  assert.is(error.line, 2);
});

/** Code that closes the factory it is pasted into, declares state outside it, and opens a factory again for the rest. */
const BREAKOUT = `})(); })
;let state = { n: 0, seen: [] };
(function () { return (function () {
function translate({ encodedData }) {
  state.n++;
  state.seen.push(encodedData.hexEncoded);
  return { result: { out: 'call ' + state.n + ' previously seen: ' + state.seen.join(',') } };
}`;

isolation('given code that closes the factory around it to keep state outside, when loaded, then it is refused as a syntax error at its first line', async ({ sandbox }) => {
  const error = await rejection(load(sandbox, BREAKOUT, { out: 'string' }), 'upload');
  assert.match(error.message, 'SyntaxError');
  assert.is(error.line, 1);
  const hijack = `})(); })\n;let JSON = { stringify: function () { return '{"ok":{"result":{"out":"forged"}}}'; } };\n(function () { return (function () {\nfunction translate() { return {}; }`;
  await rejection(sandbox.compile(hijack), 'upload');
});

isolation('given code that is whole on its own, when a later line has a syntax error, then its line is the code\'s own', async ({ sandbox }) => {
  const error = await rejection(sandbox.compile(`'use strict';\nfunction translate() {\n  return { result: { x: 1 } };\n}\n}`), 'upload');
  assert.is(error.line, 5);
});

isolation.run();
