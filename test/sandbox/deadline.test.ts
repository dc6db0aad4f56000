import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createSandbox, type Sandbox } from '../../sandbox/index.js';
import { rejection } from './fixtures.js';

/**
 * The deadline interrupts the engine only between steps of JavaScript; a
 * native method's loop takes none. A translator (or a payload steering one)
 * must not get past the deadline, and block the process, through a length
 * that costs it no memory, through many calls of a long native loop, or by a
 * native call that runs long and returns.
 */
const deadline = suite<{ sandbox: Sandbox }>('sandbox: native loops keep to the deadline');

deadline.before((context) => {
  context.sandbox = createSandbox({ poolSize: 1 });
});
deadline.after((context) => {
  context.sandbox.dispose();
});

let versions = 0;

/** A translator running `body` (a function body) and returning what it gives as `out`, as text. */
async function running(sandbox: Sandbox, body: string) {
  const code = `function translate() {\n  var out = (function () {\n${body}\n  })();\n  return { result: { out: String(out) } };\n}`;
  return sandbox.load({ key: `deadline@1.0.${versions++}`, code, spec: { out: 'string' } });
}

/** A call's outcome and how long it took; the sandbox runs the code synchronously, within `start()`. */
async function timed<T>(start: () => Promise<T>): Promise<{ outcome: Promise<T>; ms: number }> {
  const started = performance.now();
  const call = start();
  await call.catch(() => undefined);
  return { outcome: call, ms: performance.now() - started };
}

for (const [what, body] of [
  ['indexOf on an object whose length is 2^25', 'return Array.prototype.indexOf.call({ length: 2 ** 25 }, 1);'],
  ['sort of a sparse array of 2^24', 'return new Array(2 ** 24).sort().length;'],
  ['shift of an array whose length was set to 2^25', 'var a = [1]; a.length = 2 ** 25; return a.shift();'],
  ['join of an empty-separated sparse array of 2^24', 'return new Array(2 ** 24).join("").length;'],
  ['concat of the same sparse array of 2^20 16 times', 'var a = []; a.length = 2 ** 20; var parts = []; for (var i = 0; i < 16; i++) parts.push(a); return [].concat.apply([], parts).length;'],
  ['flat of a sparse array grown by an element getter', 'var big = [0]; var outer = [big]; Object.defineProperty(outer, 1, { get: function () { big.length = 2 ** 25; return 1; } }); outer.push(big); return outer.flat().length;'],
] as const) {
  deadline(`given ${what}, when called, then it fails at once with a RangeError naming the bound`, async ({ sandbox }) => {
    const program = await running(sandbox, body);
    const { outcome } = await timed(() => program.decode({ hexEncoded: '', port: 1 }));
    const error = await rejection(outcome, 'runtime');
    // A runtime error, not a timeout: the bound refused it before the deadline.
    assert.match(error.message, /RangeError: Array\.prototype\.\w+: length \d+ is more than the 2097152 elements/);
  });
}

for (const [what, body] of [
  ['a length getter that gives 1 and then 2^25', 'var reads = 0; return Array.prototype.indexOf.call({ get length() { return reads++ ? 2 ** 25 : 1; } }, 1);'],
  ['a Proxy whose length is 2^25', 'return Array.prototype.lastIndexOf.call(new Proxy({}, { get: function (t, k) { return k === "length" ? 2 ** 25 : undefined; } }), 1);'],
  ['a length whose valueOf gives 1 and then 2^25', 'var reads = 0; return Array.prototype.includes.call({ length: { valueOf: function () { return reads++ ? 2 ** 25 : 1; } } }, 1);'],
] as const) {
  deadline(`given ${what}, when an array method runs on it, then it is refused with a TypeError at once`, async ({ sandbox }) => {
    const program = await running(sandbox, body);
    const { outcome } = await timed(() => program.decode({ hexEncoded: '', port: 1 }));
    const error = await rejection(outcome, 'runtime');
    assert.match(error.message, /TypeError: Array\.prototype\.\w+ does not run in the sandbox on a Proxy/);
  });
}

for (const [what, body] of [
  ['indexOf of a sparse array of 2^18 in a loop', 'var a = []; a.length = 2 ** 18; for (;;) a.indexOf(1);'],
  ['indexOf of a typed array of 8 MiB in a loop', 'var u = new Uint8Array(8 * 1024 * 1024); for (;;) u.indexOf(1);'],
  ['skipping 2^24 steps of an array iterator', 'var a = []; a.length = 2 ** 24; return a.values().drop(2 ** 24).next().done;'],
] as const) {
  deadline(`given ${what}, when called, then it times out near the deadline`, async ({ sandbox }) => {
    const program = await running(sandbox, body);
    const { outcome, ms } = await timed(() => program.decode({ hexEncoded: '', port: 1 }));
    await rejection(outcome, 'timeout');
    // Unguarded, these run for minutes in one native call; guarded, they stop within a few deadlines even on a loaded machine.
    assert.ok(ms < 10_000, `took ${Math.round(ms)} ms`);
  });
}

deadline('given a native call that runs past the deadline and returns, when called, then the call timed out all the same', async () => {
  // A sparse sort of 2^21 (the bound) takes a few hundred ms in one native call, well past this deadline.
  const sandbox = createSandbox({ poolSize: 1, timeoutMs: 100 });
  try {
    const program = await running(sandbox, 'return new Array(2 ** 21).sort().length;');
    const error = await rejection(program.decode({ hexEncoded: '', port: 1 }), 'timeout');
    assert.match(error.message, 'timed out');
  } finally {
    sandbox.dispose();
  }
});

deadline('given a top level whose native call runs past the deadline, when uploaded, then the upload check says it timed out', async () => {
  const sandbox = createSandbox({ poolSize: 1, timeoutMs: 100 });
  try {
    await rejection(sandbox.compile('var sorted = new Array(2 ** 21).sort();\nfunction translate() { return {}; }'), 'timeout');
  } finally {
    sandbox.dispose();
  }
});

deadline('given ordinary array code, when called, then it gives what Node gives', async ({ sandbox }) => {
  const expressions = [
    '[3, 1, 10, 2, undefined, , "b", "a"].sort()',
    '[3, 1, 10, 2].toSorted()',
    '[3, 1, 10, 2].sort(function (a, b) { return a - b; })',
    '[[1, [2, [3, [4]]]], 5, , 6].flat()',
    '[[1, [2, [3, [4]]]], 5].flat(2)',
    '[[1, [2, [3, [4]]]], 5].flat(Infinity)',
    '[[1], [2]].flat(0)',
    '[1, 2, 3].flatMap(function (x) { return [x, [x * 2]]; })',
    '[1, [2]].concat([3], 4, [[5]], "six", { length: 1, 0: "not spread" })',
    'Array.prototype.concat.call("ab", [1])',
    'Array.prototype.slice.call({ length: 3, 0: "a", 2: "c" })',
    'Array.prototype.map.call("abc", function (c) { return c.toUpperCase(); })',
    '[5, 1, 4].indexOf(4) + [5, 1, 4].lastIndexOf(5) + [1, 2].join("-") + [1, 2, 3].includes(2)',
    'new Proxy([1, 2, 3], {}).length',
    'typeof Proxy.prototype + Proxy.name + Proxy.length',
    'Array.prototype.slice.call(new Uint8Array([1, 2, 3]))',
    'Array.from(new Uint8Array([9, 8, 7]).sort())',
    '[1, 2, 3].reverse().fill(0, 1).copyWithin(0, 1)',
    '[1, 2, 3].splice(1, 1)',
    '[1, 2, 3].splice(1)',
    '[1, 2, 3, 4].fill(0, 1, 2)',
    '[1, 2, 3, 4, 5].copyWithin(0, 3, 4)',
    '[1, 2, 3].reduce(function (a, b) { return a + b; })',
    '[[1], [2]].reduce(function (a, b) { return a.concat(b); }, [])',
    '[1, 2, 1].lastIndexOf(1)',
    '[1, 2, 3].toSpliced(1)',
  ];
  const program = await running(sandbox, `return JSON.stringify([${expressions.join(', ')}]);`);
  const inNode = JSON.stringify(expressions.map((expression) => new Function(`return ${expression};`)()));
  assert.is((await program.decode({ hexEncoded: '', port: 1 })).result.out, inNode);
});

deadline('given iterator code skipping with drop, when called, then it skips as the standard says', async ({ sandbox }) => {
  const program = await running(
    sandbox,
    `var refused = [-1, NaN].map(function (limit) { try { [1].values().drop(limit); return 'taken'; } catch (e) { return e.name; } });
     return JSON.stringify([[1, 2, 3, 4].values().drop(2).toArray(), [1, 2].values().drop(5).toArray(), [1, 2].values().drop(Infinity).toArray(), refused]);`,
  );
  assert.is((await program.decode({ hexEncoded: '', port: 1 })).result.out, JSON.stringify([[3, 4], [], [], ['RangeError', 'RangeError']]));
});

deadline.run();
