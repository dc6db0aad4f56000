/**
 * The event store contract: every adapter of the port passes these cases.
 * Stream names are unique per case and reads of the global order start after
 * a position taken in the case, so the suite also runs against a store that
 * holds other data (a shared EventStoreDB server).
 */
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { EventStore, ExpectedRevision } from '../../domain/eventstore/port.js';
import { ConcurrencyError } from '../../domain/shared/errors.js';
import { comparePositions, type EventMetadata, type NewEvent, type Position, type RecordedEvent } from '../../domain/shared/events.js';

export interface ContractTarget {
  store: EventStore;
  /** Closes the store and whatever the factory opened for it. */
  close(): Promise<void>;
}

export function newEvent(type = 'ThingHappened', data: Record<string, unknown> = {}, metadata: Partial<EventMetadata> = {}): NewEvent {
  return {
    id: randomUUID(),
    type,
    data: { n: Math.random(), ...data },
    metadata: { actor: 'system:contract', correlationId: randomUUID(), time: new Date().toISOString(), ...metadata },
  };
}

export const streamName = (what: string) => `${what}-${randomUUID()}`;

export async function waitUntil(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`gave up waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function refused(attempt: Promise<unknown>): Promise<ConcurrencyError> {
  try {
    await attempt;
  } catch (error) {
    if (error instanceof ConcurrencyError) return error;
    throw error;
  }
  assert.unreachable('expected the append to be refused with ConcurrencyError');
  throw new Error('unreachable');
}

const ids = (events: { id: string }[]) => events.map((e) => e.id);

function assertIncreasing(positions: Position[]): void {
  for (let i = 1; i < positions.length; i++) {
    assert.ok(comparePositions(positions[i - 1]!, positions[i]!) < 0, `position ${i} is not after position ${i - 1}`);
  }
}

/**
 * Registers the contract as one uvu suite named after the adapter, and runs it.
 * `kind` is the adapter's `store.kind`, known before the store is opened so that
 * the one case an adapter cannot honour is reported as skipped, with its reason.
 */
export function eventStoreContract(adapter: string, kind: EventStore['kind'], open: () => Promise<ContractTarget>): void {
  const test = suite<{ target: ContractTarget; store: EventStore }>(`${adapter} event store contract`);

  test.before(async (ctx) => {
    ctx.target = await open();
    ctx.store = ctx.target.store;
    assert.is(ctx.store.kind, kind, 'the store is the adapter the suite was registered for');
  });
  test.after(async (ctx) => {
    await ctx.target?.close();
  });

  /** The position of a fresh event, to read the global order after it. */
  const mark = async (store: EventStore) => (await store.append(streamName('marker'), [newEvent('Marked')], 'no_stream')).position;

  test('when events are appended to a new stream, then reading it returns them in order from revision 0', async ({ store }) => {
    const s = streamName('order');
    const events = [newEvent('A', { i: 0 }), newEvent('B', { i: 1 }), newEvent('C', { i: 2 })];
    const result = await store.append(s, events, 'no_stream');
    assert.is(result.nextRevision, 2);
    const read = await store.readStream(s);
    assert.equal(ids(read), ids(events));
    assert.equal(read.map((e) => e.revision), [0, 1, 2]);
    assert.equal(read.map((e) => e.type), ['A', 'B', 'C']);
    assert.equal(read.map((e) => e.data), events.map((e) => e.data));
    assert.ok(read.every((e) => e.streamId === s));
    assertIncreasing(read.map((e) => e.position));
    assert.equal(result.position, read[2]!.position, 'the append answers the position of its last event');
  });

  test('when a stream is read from a revision with a limit, then only that slice comes back', async ({ store }) => {
    const s = streamName('slice');
    const events = [newEvent(), newEvent(), newEvent(), newEvent()];
    await store.append(s, events, 'no_stream');
    assert.equal(ids(await store.readStream(s, { fromRevision: 1, limit: 2 })), ids(events.slice(1, 3)));
    assert.equal(ids(await store.readStream(s, { fromRevision: 3 })), ids(events.slice(3)));
    assert.equal(await store.readStream(s, { fromRevision: 4 }), []);
  });

  test('when a stream does not exist, then reading it returns no events', async ({ store }) => {
    assert.equal(await store.readStream(streamName('missing')), []);
  });

  test('given streams, when several are read at once, then each stream in revision order, in the order asked; a missing one adds nothing', async ({ store }) => {
    if (!store.readStreams) return; // an adapter without it is read stream by stream
    const [a, b, c] = [streamName('many'), streamName('many'), streamName('many')];
    const ofA = [newEvent(), newEvent(), newEvent()];
    const ofB = [newEvent()];
    const ofC = [newEvent(), newEvent()];
    await store.append(a, ofA.slice(0, 2), 'no_stream');
    await store.append(b, ofB, 'no_stream');
    await store.append(c, ofC, 'no_stream');
    await store.append(a, ofA.slice(2), 'any');
    const read = await store.readStreams([c, streamName('missing'), a, b]);
    assert.equal(ids(read), ids([...ofC, ...ofA, ...ofB]));
    assert.equal(read.map((e) => `${e.streamId === a ? 'a' : e.streamId === b ? 'b' : 'c'}${e.revision}`), ['c0', 'c1', 'a0', 'a1', 'a2', 'b0']);
    assert.equal(await store.readStreams([]), []);
  });

  test('given no stream, when appending with no_stream, then accepted; given the stream, then refused and nothing is written', async ({ store }) => {
    const s = streamName('no-stream');
    const first = newEvent();
    await store.append(s, [first], 'no_stream');
    const error = await refused(store.append(s, [newEvent()], 'no_stream'));
    assert.is(error.streamId, s);
    assert.is(error.actual, '0');
    assert.equal(ids(await store.readStream(s)), [first.id]);
  });

  test('given no stream, when appending with exists, then refused; given the stream, then accepted', async ({ store }) => {
    const s = streamName('exists');
    const error = await refused(store.append(s, [newEvent()], 'exists'));
    assert.is(error.actual, 'no_stream');
    assert.equal(await store.readStream(s), []);
    const first = newEvent();
    const second = newEvent();
    await store.append(s, [first], 'no_stream');
    const result = await store.append(s, [second], 'exists');
    assert.is(result.nextRevision, 1);
    assert.equal(ids(await store.readStream(s)), [first.id, second.id]);
  });

  test('when appending with the current revision, then accepted; with a stale or a future revision, then refused', async ({ store }) => {
    const s = streamName('revision');
    const events = [newEvent(), newEvent(), newEvent()];
    await store.append(s, events.slice(0, 2), 'no_stream');
    const result = await store.append(s, [events[2]!], 1);
    assert.is(result.nextRevision, 2);
    for (const wrong of [1, 0, 3, 7] satisfies ExpectedRevision[]) {
      const error = await refused(store.append(s, [newEvent()], wrong));
      assert.is(error.expected, String(wrong));
      assert.is(error.actual, '2');
    }
    const missing = await refused(store.append(streamName('revision'), [newEvent()], 0));
    assert.is(missing.actual, 'no_stream');
    assert.equal(ids(await store.readStream(s)), ids(events));
  });

  test('when appending with any, then accepted on a new stream and on an existing one', async ({ store }) => {
    const s = streamName('any');
    const a = newEvent();
    const b = newEvent();
    assert.is((await store.append(s, [a], 'any')).nextRevision, 0);
    assert.is((await store.append(s, [b], 'any')).nextRevision, 1);
    assert.equal(ids(await store.readStream(s)), [a.id, b.id]);
  });

  test('when an append is retried with the same event ids, then it answers as the first time and stores nothing twice', async ({ store }) => {
    const s = streamName('retry');
    const batch = [newEvent(), newEvent()];
    const first = await store.append(s, batch, 'no_stream');
    assert.equal(await store.append(s, batch, 'no_stream'), first);
    const next = [newEvent()];
    const second = await store.append(s, next, 1);
    assert.equal(await store.append(s, next, 1), second);
    const byAny = [newEvent()];
    const third = await store.append(s, byAny, 'any');
    assert.equal(await store.append(s, byAny, 'any'), third);
    assert.equal(ids(await store.readStream(s)), ids([...batch, ...next, ...byAny]));
  });

  test('when an append is retried after the stream moved on, then it is still a no-op with the first answer', async ({ store }) => {
    const s = streamName('late-retry');
    const a = newEvent();
    const b = newEvent();
    const c = newEvent();
    const d = newEvent();
    const e = newEvent();
    const first = await store.append(s, [a], 'no_stream');
    await store.append(s, [b], 0);
    assert.equal(await store.append(s, [a], 'no_stream'), first);
    const third = await store.append(s, [c], 1);
    await store.append(s, [d], 2);
    assert.equal(await store.append(s, [c], 1), third);
    const fifth = await store.append(s, [e], 'any');
    await store.append(s, [newEvent()], 'any');
    assert.equal(await store.append(s, [e], 'any'), fifth);
    const stored = await store.readStream(s);
    assert.is(stored.length, 6);
    assert.equal(ids(stored).slice(0, 5), ids([a, b, c, d, e]));
    assert.is(new Set(ids(stored)).size, 6);
  });

  test('when an append made with exists is retried, then it answers as the first time, even after the stream moved on, and stores nothing twice', async ({ store }) => {
    const s = streamName('exists-retry');
    const first = newEvent();
    await store.append(s, [first], 'no_stream');
    const batch = [newEvent(), newEvent()];
    const original = await store.append(s, batch, 'exists');
    assert.is(original.nextRevision, 2);
    assert.equal(await store.append(s, batch, 'exists'), original);
    const later = newEvent();
    await store.append(s, [later], 'exists');
    assert.equal(await store.append(s, batch, 'exists'), original, 'a late retry gets the first answer');
    assert.equal(ids(await store.readStream(s)), ids([first, ...batch, later]));
  });

  const elsewhere =
    'given an event stored in one stream, when an event with the same id is appended to another stream, then it is refused with ConcurrencyError and neither stream changes';
  if (kind === 'postgres') {
    test(elsewhere, async ({ store }) => {
      const home = streamName('id-home');
      const event = newEvent();
      const original = await store.append(home, [event], 'no_stream');
      const fresh = streamName('id-elsewhere');
      const existing = streamName('id-elsewhere');
      const resident = newEvent();
      await store.append(existing, [resident], 'no_stream');
      for (const [target, expected] of [[fresh, 'no_stream'], [fresh, 'any'], [existing, 'any'], [existing, 0], [existing, 'exists']] as [string, ExpectedRevision][]) {
        const error = await refused(store.append(target, [{ ...event, data: { other: true } }], expected));
        assert.is(error.streamId, target);
        // Alongside a new id too: the append is atomic.
        await refused(store.append(target, [newEvent(), event], expected));
      }
      assert.equal(await store.readStream(fresh), []);
      assert.equal(ids(await store.readStream(existing)), [resident.id]);
      assert.equal(ids(await store.readStream(home)), [event.id]);
      assert.equal(await store.append(home, [event], 'no_stream'), original, 'a retry in its own stream is still a no-op');
    });
  } else {
    test.skip(`${elsewhere} (skipped for ${adapter}: EventStoreDB recognises a repeated event id only within one stream, so it stores the event in the other stream)`, () => {});
  }

  test('when reading all from a position, then the later events come in global order, up to the limit', async ({ store }) => {
    const from = await mark(store);
    const s1 = streamName('all');
    const s2 = streamName('all');
    const a1 = newEvent();
    const b1 = newEvent();
    const a2 = newEvent();
    const appended = [
      await store.append(s1, [a1], 'no_stream'),
      await store.append(s2, [b1], 'no_stream'),
      await store.append(s1, [a2], 0),
    ];
    const page = await store.readAll({ after: from, limit: 1000 });
    assertIncreasing([from, ...page.map((e) => e.position)]);
    const ours = page.filter((e) => e.streamId === s1 || e.streamId === s2);
    assert.equal(ids(ours), [a1.id, b1.id, a2.id]);
    assert.equal(ours.map((e) => e.position), appended.map((r) => r.position));
    const limited = await store.readAll({ after: from, limit: 2 });
    assert.equal(ids(limited), ids(page.slice(0, 2)));
    const rest = await store.readAll({ after: limited[1]!.position, limit: 1000 });
    assert.equal(ids(rest).slice(0, page.length - 2), ids(page.slice(2)));
  });

  test('when subscribing from a position, then it catches up on stored events and then follows new ones live', async ({ store }) => {
    const from = await mark(store);
    const s = streamName('subscribe');
    const stored = [newEvent(), newEvent(), newEvent()];
    await store.append(s, stored.slice(0, 2), 'no_stream');
    await store.append(s, stored.slice(2), 1);
    const seen: RecordedEvent[] = [];
    const positions: Position[] = [];
    const subscription = store.subscribe({ after: from, batchSize: 2 }, async (batch) => {
      assert.ok(batch.length > 0 && batch.length <= 2, 'batches are not empty and respect the batch size');
      positions.push(...batch.map((e) => e.position));
      seen.push(...batch.filter((e) => e.streamId === s));
    });
    try {
      await waitUntil(() => seen.length >= 3, 'the stored events arrived');
      const live = [newEvent(), newEvent()];
      await store.append(s, [live[0]!], 2);
      await store.append(s, [live[1]!], 3);
      await waitUntil(() => seen.length >= 5, 'the live events arrived');
      assert.equal(ids(seen), ids([...stored, ...live]));
      assertIncreasing([from, ...positions]);
    } finally {
      await subscription.stop();
    }
  });

  test('when events carry metadata, then actor, correlation id, causation id and time come back unchanged', async ({ store }) => {
    const from = await mark(store);
    const s = streamName('metadata');
    const caused = newEvent('Caused', {}, { actor: randomUUID(), correlationId: 'req-42', causationId: randomUUID(), time: '2024-05-01T12:00:00.000Z' });
    const plain = newEvent('Plain', {}, { actor: 'system:ingest', correlationId: 'mqtt-7', time: '2024-05-01T12:00:01.000Z' });
    await store.append(s, [caused, plain], 'no_stream');
    const read = await store.readStream(s);
    assert.equal(read.map((e) => e.metadata), [caused.metadata, plain.metadata]);
    const all = (await store.readAll({ after: from, limit: 1000 })).filter((e) => e.streamId === s);
    assert.equal(all.map((e) => e.metadata), [caused.metadata, plain.metadata]);
  });

  test('when writers append to one stream at once with the same expected revision, then exactly one wins', async ({ store }) => {
    for (const expected of ['no_stream', 0] satisfies ExpectedRevision[]) {
      const s = streamName('race');
      const base = newEvent();
      if (expected === 0) await store.append(s, [base], 'no_stream');
      const contenders = Array.from({ length: 8 }, () => newEvent());
      const outcomes = await Promise.allSettled(contenders.map((e) => store.append(s, [e], expected)));
      const won = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [contenders[i]!] : []));
      assert.is(won.length, 1, `exactly one writer wins with expected ${expected}`);
      for (const o of outcomes) {
        if (o.status === 'rejected') assert.instance(o.reason, ConcurrencyError);
      }
      const stored = await store.readStream(s);
      assert.equal(ids(stored), expected === 0 ? [base.id, won[0]!.id] : [won[0]!.id]);
    }
  });

  test.run();
}
