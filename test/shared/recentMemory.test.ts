import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RecentMemory } from '../../domain/shared/recentMemory.js';

const memory = suite('recent memory');

memory('given far more entries than its capacity, then it holds at most the capacity and at least the latest half', () => {
  const m = new RecentMemory<number, string>(1000);
  for (let i = 0; i < 10_000; i++) {
    m.set(i, `v${i}`);
    assert.ok(m.size <= 1000, `size ${m.size} after ${i + 1} inserts`);
  }
  for (let i = 10_000 - 500; i < 10_000; i++) assert.is(m.get(i), `v${i}`);
  assert.is(m.get(0), undefined);
  assert.is(m.has(5), false);
});

memory('given an entry read now and then, then it stays while unread ones of its age go', () => {
  const m = new RecentMemory<string, number>(100);
  m.set('hot', 1);
  m.set('cold', 2);
  for (let i = 0; i < 1000; i++) {
    m.set(`filler-${i}`, i);
    if (i % 40 === 0) assert.is(m.get('hot'), 1);
  }
  assert.is(m.get('hot'), 1);
  assert.is(m.get('cold'), undefined);
});

memory('given an overwritten or deleted key, then the newest value or nothing is found, never a stale one', () => {
  const m = new RecentMemory<string, number>(4);
  m.set('a', 1);
  m.set('b', 2); // the young generation is full: a and b become old
  m.set('a', 3);
  assert.is(m.get('a'), 3);
  m.delete('b');
  assert.is(m.get('b'), undefined);
  assert.is(m.has('b'), false);
  m.set('c', undefined as unknown as number);
  assert.is(m.has('c'), true);
});

memory('given a capacity under two, then it is refused', () => {
  assert.throws(() => new RecentMemory(1), /at least two/);
});

memory.run();
