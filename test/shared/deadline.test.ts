import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { getEventListeners } from 'node:events';
import { deadline } from '../../domain/shared/deadline.js';

const limit = suite('deadline: a time limit that a stop cuts short');

limit('when the time runs out, then the signal aborts with a timeout', async () => {
  const stop = new AbortController();
  const d = deadline(20, stop.signal);
  assert.is(d.signal.aborted, false);
  await new Promise((r) => setTimeout(r, 60));
  assert.is(d.signal.aborted, true);
  assert.is((d.signal.reason as DOMException).name, 'TimeoutError');
  d.clear();
});

limit('when the stop aborts first, then the signal aborts with its reason', () => {
  const stop = new AbortController();
  const d = deadline(60_000, stop.signal);
  stop.abort(new Error('stopping'));
  assert.is(d.signal.aborted, true);
  assert.is((d.signal.reason as Error).message, 'stopping');
  d.clear();
});

limit('given a stop already aborted, then the signal is aborted from the start', () => {
  const stop = new AbortController();
  stop.abort(new Error('stopped'));
  assert.is(deadline(60_000, stop.signal).signal.aborted, true);
});

limit('when the work is done and cleared, then the long-lived stop keeps nothing of it, and the time limit no longer fires', async () => {
  const stop = new AbortController();
  const done = Array.from({ length: 1000 }, () => deadline(10, stop.signal));
  assert.is(getEventListeners(stop.signal, 'abort').length, 1000);
  for (const d of done) d.clear();
  assert.is(getEventListeners(stop.signal, 'abort').length, 0);
  await new Promise((r) => setTimeout(r, 40));
  assert.ok(done.every((d) => !d.signal.aborted));
});

limit.run();
