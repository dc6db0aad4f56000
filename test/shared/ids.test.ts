import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { isUuid, newEventId } from '../../domain/shared/ids.js';

const ids = suite('event ids');

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const timeOf = (id: string) => parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

ids('given a time, then the id is a version 7 UUID of the RFC variant with that time in its first 48 bits', () => {
  const at = Date.UTC(2026, 10, 27, 22, 50, 1, 234);
  const id = newEventId(at);
  assert.ok(isUuid(id), id);
  assert.match(id, V7);
  assert.is(timeOf(id), at);
  assert.is(timeOf(newEventId(0)), 0);
  assert.is(timeOf(newEventId(2 ** 48 - 1)), 2 ** 48 - 1);
});

ids('given ids made a millisecond apart, then they sort in the order they were made, as text and as PostgreSQL compares uuids', () => {
  const start = Date.UTC(2026, 0, 1);
  const made = Array.from({ length: 1000 }, (_, i) => newEventId(start + i * 1));
  const sorted = [...made].sort();
  assert.equal(sorted, made);
  // PostgreSQL orders uuids by their 16 bytes.
  const bytes = made.map((id) => Buffer.from(id.replace(/-/g, ''), 'hex'));
  for (let i = 1; i < bytes.length; i++) assert.ok(Buffer.compare(bytes[i - 1]!, bytes[i]!) < 0, `${made[i - 1]} before ${made[i]}`);
});

ids('given many ids made in one millisecond, then no two are the same', () => {
  const at = Date.now();
  const made = new Set(Array.from({ length: 20_000 }, () => newEventId(at)));
  assert.is(made.size, 20_000);
});

ids.run();
