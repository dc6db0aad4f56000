import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { eventually } from '../ingest/support.js';
import { whileLocked } from '../support/locked.js';

/**
 * One user's requests take turns (`HTTP_USER_CONCURRENCY` at a time, `HTTP_USER_QUEUE` waiting): a burst of one
 * user's slow requests holds at most a few of the HTTP front's database connections, and other users are served.
 */

/** HTTP sessions of the platform waiting on a lock, as the server sees them. */
const waitingOnLock = async (t: TestPlatform) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name LIKE 'platform % http' AND wait_event_type = 'Lock'`.execute(t.platform.deps.db)).rows[0]!.n;

/** Settles to the answer, or to 'waiting' if none came within `ms`. */
const answeredWithin = <T>(request: Promise<T>, ms: number) => Promise.race([request, new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms))]);

const turns = suite<{ t: TestPlatform; alice: GivenUser; bob: GivenUser }>('one user’s requests take turns');

turns.before(async (ctx) => {
  ctx.t = await startTestPlatform({ httpConnections: 4, httpUserConcurrency: 2, httpUserQueue: 3 });
  ctx.alice = await givenUser(ctx.t, 'alice', { attributes: { roles: ['installer'] } });
  ctx.bob = await givenUser(ctx.t, 'bob', { attributes: { roles: ['installer'] } });
});
turns.after(async (ctx) => {
  await ctx.t.stop();
});

/** Runs `during` while another session holds the dashboards table so that even its reads wait. */
const whileDashboardsHeld = <T>(t: TestPlatform, during: () => Promise<T>) => whileLocked(t.platform.deps.db, 'dashboards', during, 'ACCESS EXCLUSIVE');

/** A read of the dashboards whose caller can go away: `request` settles to `aborted` then. */
function abortableRead(t: TestPlatform, user: GivenUser) {
  const abort = new AbortController();
  const request = fetch(`${t.baseUrl}/api/dashboards`, { headers: { authorization: `Bearer ${user.token}` }, signal: abort.signal }).catch(() => 'aborted');
  return { abort, request };
}

const twoWaitOnTheLock = (t: TestPlatform) => eventually(async () => (await waitingOnLock(t)) === 2, 10_000, 'two of alice’s reads to wait on the lock');
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

turns('given a user whose requests wait on a locked table, when they send five at once, then two run and three wait, a sixth is refused with 429, and another user is served at once; when the table is free, each of the five is answered', async ({ t, alice, bob }) => {
  // Given the dashboards table locked by another session,
  const reads = await whileDashboardsHeld(t, async () => {
    // when alice sends five reads of it at once,
    const reads = Array.from({ length: 5 }, () => t.call('GET', '/api/dashboards', { token: alice.token }));
    await twoWaitOnTheLock(t);
    await sleep(300);
    assert.is(await waitingOnLock(t), 2, 'the other three wait their turn, holding no connection');
    // then a sixth is refused, and bob is served at once.
    const sixth = await t.call('GET', '/api/dashboards', { token: alice.token });
    assert.is(sixth.status, 429, sixth.text);
    assert.is(sixth.text, 'ERR - too many requests at once: 2 of yours run at a time and 3 wait their turn; try again when one is answered');
    assert.is(sixth.headers.get('retry-after'), '1');
    const served = await answeredWithin(t.call('GET', '/api/iotnodes', { token: bob.token }), 3_000);
    assert.ok(served !== 'waiting', 'bob waited for a connection');
    assert.is(served.status, 200);
    return reads;
  });
  // When the table is free, each of alice's reads is answered.
  assert.equal((await Promise.all(reads)).map((r) => r.status), [200, 200, 200, 200, 200]);
});

turns('given a user whose requests wait their turn behind two slow ones, when their callers go away, then their places are freed for the user’s next requests', async ({ t, alice }) => {
  const { slow, next } = await whileDashboardsHeld(t, async () => {
    const slow = Array.from({ length: 2 }, () => t.call('GET', '/api/dashboards', { token: alice.token }));
    await twoWaitOnTheLock(t);
    // Three callers who give up while waiting their turn: their places are freed.
    const gone = Array.from({ length: 3 }, () => abortableRead(t, alice));
    await sleep(300);
    for (const g of gone) g.abort.abort();
    assert.equal(await Promise.all(gone.map((g) => g.request)), ['aborted', 'aborted', 'aborted']);
    await sleep(100);
    // Their places are free again: three more wait instead of a 429.
    const next = Array.from({ length: 3 }, () => t.call('GET', '/api/iotnodes', { token: alice.token }));
    await sleep(300);
    return { slow, next };
  });
  assert.equal((await Promise.all(slow)).map((r) => r.status), [200, 200]);
  assert.equal((await Promise.all(next)).map((r) => r.status), [200, 200, 200]);
});

turns('given two of a user’s requests running on a locked table, when their callers go away, then their turns last until the requests end: the user’s next request waits, and runs once they have ended', async ({ t, alice }) => {
  // Returned in an object: a promise returned as it is would be awaited while the table is still held.
  const { next } = await whileDashboardsHeld(t, async () => {
    const running = Array.from({ length: 2 }, () => abortableRead(t, alice));
    await twoWaitOnTheLock(t);
    for (const r of running) r.abort.abort();
    assert.equal(await Promise.all(running.map((r) => r.request)), ['aborted', 'aborted']);
    // Their queries still hold two connections: aborting them must not let alice start more.
    const next = t.call('GET', '/api/iotnodes', { token: alice.token });
    assert.is(await answeredWithin(next, 1_000), 'waiting');
    return { next };
  });
  assert.is((await next).status, 200);
});

turns.run();
