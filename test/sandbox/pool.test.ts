import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createSandbox, type Program, type Sandbox } from '../../sandbox/index.js';
import { rejection } from './fixtures.js';

/**
 * A decoder with a top-level call counter. Every call runs a fresh instance
 * of the code, so the count is 1 in every call, whether the context is a
 * reused warm one or a new one: the pool's statistics tell them apart.
 * Port 1 decodes; ports 2 to 4 throw, loop, and exhaust the heap; port 5
 * decodes and leaves a promise job pending.
 */
const counting = `
var calls = 0;
function translate({ encodedData }) {
  calls++;
  if (encodedData.port === 2) throw new Error('bad frame');
  if (encodedData.port === 3) while (true) {}
  if (encodedData.port === 4) { const chunks = []; for (;;) chunks.push('x'.repeat(1024 * 1024) + chunks.length); }
  if (encodedData.port === 5) Promise.resolve().then(function () {});
  return { result: { calls } };
}
`;

const pool = suite<{ sandbox: Sandbox; program: Program }>('sandbox: the warm context pool');

pool.before(async (context) => {
  // A deadline well above what the heap bomb takes to reach the memory cap, so it fails on memory, not time, also on a slow machine.
  context.sandbox = createSandbox({ poolSize: 1, timeoutMs: 1000 });
  context.program = await context.sandbox.load({ key: 'counting@1.0.0', code: counting, spec: { calls: { type: 'number', unit: '', quantity: 'count' } } });
});
pool.after((context) => {
  context.sandbox.dispose();
});

const decode = async (program: Program) => (await program.decode({ hexEncoded: '', port: 1 })).result.calls;

pool('given a loaded translator, when it is called several times in a row, then every call after the first reuses the same warm context and starts from the code as uploaded', async ({ program, sandbox }) => {
  const before = program.stats();
  const counts = [];
  for (let i = 0; i < 10; i++) counts.push(await decode(program));
  assert.equal(counts, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 'a call saw the counter of an earlier one');
  const after = program.stats();
  assert.is(after.reused - before.reused, 9);
  assert.is(after.created, before.created, 'no context was built for these calls');
  assert.is(after.disposeFailures, 0);
  assert.is(sandbox.stats().reused, after.reused);
});

pool('given a time-out and an out-of-memory failure, when each context is disposed, then no disposal fails and the next call runs in a new context', async ({ program, sandbox }) => {
  const failures: [number, 'timeout' | 'memory'][] = [[3, 'timeout'], [4, 'memory']];
  for (const [port, kind] of failures) {
    const before = program.stats();
    await rejection(program.decode({ hexEncoded: '', port }), kind);
    const failed = program.stats();
    assert.is(failed.discarded, before.discarded + 1, `the ${kind} context was discarded`);
    assert.is(failed.disposeFailures, 0, `disposing after a ${kind} failure freed everything`);
    assert.is(await decode(program), 1);
    assert.is(program.stats().reused, failed.reused, `a context that failed (${kind}) is never reused`);
    assert.ok(program.stats().created > before.created, 'a new context was built');
    assert.is(await decode(program), 1);
    assert.is(program.stats().reused, failed.reused + 1, 'the new context is then reused');
  }
  assert.is(sandbox.stats().disposeFailures, 0);
});

pool('given failures that cost the context and one that does not, when each is caught, then the error says whether the context was discarded', async ({ program }) => {
  assert.is((await rejection(program.decode({ hexEncoded: '', port: 4 }), 'memory')).discarded, true);
  assert.is((await rejection(program.decode({ hexEncoded: '', port: 2 }), 'runtime')).discarded, false);
  assert.is((await program.decode({ hexEncoded: '', port: 1 })).discarded, undefined);
  assert.is((await program.decode({ hexEncoded: '', port: 5 })).discarded, true, 'promise jobs left pending cost the context, though the result stands');
});

pool('given a translator whose calls leave lodash caching long paths, when one device\'s uplinks have filled the heap with them, then the context is replaced before another device\'s uplink runs out of memory', async ({ sandbox }) => {
  // lodash memoizes each string path _.get parses, in a cache of its own that outlives the call.
  const program = await sandbox.load({
    key: 'path-cache@1.0.0',
    code: `function translate({ encodedData }) {
      if (encodedData.port === 1) return { result: { calls: new Uint8Array(10 * 1024 * 1024).fill(1).length } };
      _.get({}, 'k'.repeat(300000) + encodedData.port + '.x');
      return { result: { calls: encodedData.port } };
    }`,
    spec: { calls: { type: 'number', unit: '', quantity: 'count' } },
  });
  const recycled: number[] = [];
  for (let port = 10; port < 24; port++) {
    const out = await program.decode({ hexEncoded: '', port });
    if (out.discarded) recycled.push(port);
  }
  assert.ok(recycled.length >= 1, 'a context that kept megabytes from call to call was replaced');
  assert.is((await program.decode({ hexEncoded: '', port: 1 })).result.calls, 10 * 1024 * 1024, "the other device's uplink has the heap it is promised");
});

pool('given a throw, when the next call comes, then the same context serves it, from the same starting state', async ({ program }) => {
  await decode(program);
  const before = program.stats();
  await rejection(program.decode({ hexEncoded: '', port: 2 }), 'runtime');
  assert.is(await decode(program), 1);
  const after = program.stats();
  assert.is(after.discarded, before.discarded, 'a context that threw is kept');
  assert.is(after.created, before.created);
  assert.is(after.reused, before.reused + 2, 'the throwing call and the next ran in the warm context');
});

pool('given the sandbox, when translators are unloaded and code is compiled at upload, then those disposals free everything too', async ({ sandbox }) => {
  await sandbox.compile(counting);
  const other = await sandbox.load({ key: 'other@1.0.0', code: counting, spec: { calls: 'number' } });
  assert.is(await decode(other), 1);
  assert.is(await decode(other), 1);
  const reused = sandbox.stats().reused;
  sandbox.unload('other@1.0.0');
  assert.is(sandbox.stats().reused, reused, 'reuses of an unloaded translator stay counted');
  assert.is(sandbox.stats().disposeFailures, 0);
});

pool.run();
