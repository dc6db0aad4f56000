import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createHash, randomUUID } from 'node:crypto';
import { causedId, derivedId, isUuid, newEventId } from '../../domain/shared/ids.js';

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

ids('given a cause with a random id, then the caused id is derived from the parts alone, as before time-ordered ids existed', () => {
  const cause = randomUUID();
  const parts = ['calc-1', cause];
  const h = createHash('sha256').update(parts.join('/')).digest('hex');
  const expected = `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;
  assert.is(derivedId(...parts), expected);
  assert.is(causedId(cause, parts), expected);
  // A derived cause (version 5) passes the same form on.
  assert.is(causedId(expected, ['outcome', expected, 'n1']), derivedId('outcome', expected, 'n1'));
});

ids('given a cause with a time-ordered id, then the caused id keeps its time, is the same on every retry, and differs by its parts', () => {
  const at = Date.UTC(2026, 10, 27, 23, 0, 0, 5);
  const cause = newEventId(at);
  const run = causedId(cause, ['trigger', cause, 'rule-1', 'n1']);
  assert.match(run, /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-8[0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.is(timeOf(run), at);
  assert.is(causedId(cause, ['trigger', cause, 'rule-1', 'n1']), run, 'a retry makes the same id');
  assert.is.not(causedId(cause, ['trigger', cause, 'rule-2', 'n1']), run);
  // What the run causes in turn is in time order too.
  const outcome = causedId(run, ['outcome', run, 'n2']);
  assert.is(timeOf(outcome), at);
  assert.is.not(outcome, run);
});

ids('given causes made later, then what they cause sorts later', () => {
  const start = Date.UTC(2026, 0, 1);
  const effects = Array.from({ length: 200 }, (_, i) => {
    const cause = newEventId(start + i);
    return causedId(cause, ['calc-1', cause]);
  });
  assert.equal([...effects].sort(), effects);
});

ids.run();
