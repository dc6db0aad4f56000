/**
 * Deleting a unit checks that it has no members, under the organization tree's
 * lock; a member joining the unit (an existing user added, or a member created)
 * takes the same lock and joins the unit as it stands then. So a join between
 * a delete's check and its write waits, finds the unit gone, and answers 404:
 * no user is ever left a member of a deleted unit.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform, type Response } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { givenUser } from '../users/given.js';

const race = suite<{ t: TestPlatform }>('organizations: a unit deleted while a member joins');

race.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
race.after(async (ctx) => {
  await ctx.t.stop();
});

/** The advisory lock key the delete's append waits on while the test holds it. */
const GATE = 424_242;

/**
 * Runs `body` while every append of `OrganizationDeleted` waits, inside the database, until `body` opens the gate:
 * a delete past its "no members" check and before its write, as a slow write would leave it.
 */
async function holdingDeletes(t: TestPlatform, body: (open: () => Promise<void>) => Promise<void>): Promise<void> {
  const db = t.platform.deps.db;
  const gate = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await gate.connect();
  await gate.query('SELECT pg_advisory_lock($1)', [GATE]);
  let held = true;
  const open = async () => {
    if (held) await gate.query('SELECT pg_advisory_unlock($1)', [GATE]);
    held = false;
  };
  await sql.raw(`CREATE FUNCTION test_hold_deletes() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.type = 'OrganizationDeleted' THEN PERFORM pg_advisory_xact_lock(${GATE}); END IF;
      RETURN NEW;
    END $$`).execute(db);
  await sql.raw(`CREATE TRIGGER test_hold_deletes BEFORE INSERT ON es.events FOR EACH ROW EXECUTE FUNCTION test_hold_deletes()`).execute(db);
  try {
    await body(open);
  } finally {
    await open();
    await gate.end();
    await sql.raw('DROP TRIGGER test_hold_deletes ON es.events').execute(db);
    await sql.raw('DROP FUNCTION test_hold_deletes()').execute(db);
  }
}

/** Whether an append of a unit's deletion waits at the gate. */
const deleteWaiting = async (t: TestPlatform) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = ${GATE}`.execute(t.platform.deps.db)).rows[0]!.n === 1;

/** Settles to the answer, or to 'waiting' if none came within `ms`: a join under the lock waits for the delete. */
const answeredWithin = <T>(request: Promise<T>, ms: number) => Promise.race([request, new Promise<'waiting'>((resolve) => setTimeout(() => resolve('waiting'), ms))]);

/** The units the user's profile names, from the event log (a join may be stored while the read models wait). */
async function unitsOf(t: TestPlatform, userId: string): Promise<string[]> {
  let units: string[] = [];
  for (const e of await t.platform.deps.store.readStream(`user-${userId}`)) {
    const data = e.data as { profile?: { attributes: { organization?: string[] } }; organization?: { name: string } };
    if (e.type === 'UserCreated') units = data.profile!.attributes.organization ?? [];
    if (e.type === 'UserJoinedOrganization') units = [...units, data.organization!.name];
  }
  return units;
}

async function deletedWhileJoining(t: TestPlatform, name: string, join: (unitId: string) => Promise<Response>): Promise<{ deleted: Response; joined: Response }> {
  const created = await t.call('POST', '/api/organizations', { body: { name } });
  assert.is(created.status, 201, created.text);
  let deleted!: Response;
  let joined!: Response;
  await holdingDeletes(t, async (open) => {
    // Given a delete of the empty unit past its check, its write not stored yet,
    const deleting = t.call('DELETE', `/api/organizations/${created.body._id}`);
    await eventually(() => deleteWaiting(t), 10_000, 'the delete to reach its write');
    // when a member joins the unit,
    const joining = join(created.body._id);
    await answeredWithin(joining, 2000);
    // and the delete goes on,
    await open();
    deleted = await deleting;
    joined = await joining;
  });
  return { deleted, joined };
}

race('given a unit whose delete passed its "no members" check, when an admin adds an existing user to it, then the join waits for the delete and finds the unit gone: 404, and the user is a member of no deleted unit', async ({ t }) => {
  const user = await givenUser(t, 'pia');
  const { deleted, joined } = await deletedWhileJoining(t, 'Doomed', (unit) => t.call('PUT', `/api/organizations/${unit}/members/${user.id}`));
  assert.is(deleted.status, 204, deleted.text);
  assert.is(joined.status, 404, joined.text);
  assert.equal(await unitsOf(t, user.id), []);
});

race('given a unit whose delete passed its "no members" check, when its admin creates a member in it, then the creation waits for the delete and finds the unit gone: 404, and no user names the deleted unit', async ({ t }) => {
  const { deleted, joined } = await deletedWhileJoining(t, 'Doomed too', (unit) => t.call('POST', `/api/organizations/${unit}/members`, { body: { username: 'quentin' } }));
  assert.is(deleted.status, 204, deleted.text);
  assert.is(joined.status, 404, joined.text);
  const users = await t.platform.deps.db.selectFrom('users').select('id').where(sql<boolean>`profile->'attributes'->'organization' ? ${'Doomed too'}`).execute();
  assert.equal(users, []);
  const stored = await sql<{ n: number }>`SELECT count(*)::int AS n FROM es.events WHERE type = 'UserCreated' AND data->'profile'->>'username' = 'quentin'`.execute(t.platform.deps.db);
  assert.is(stored.rows[0]!.n, 0);
});

race.run();
