import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { sql } from 'kysely';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * An event no projection can apply (here: a read-model row PostgreSQL
 * refuses, through a trigger standing for any refusal the code did not
 * foresee) is set aside after being tried alone, and every later event is
 * applied: one bad event never stalls every read model.
 */
const parking = suite<{ t: TestPlatform }>('Projections set aside an event they cannot apply');

parking.before(async (ctx) => {
  ctx.t = await startTestPlatform();
});
parking.after(async (ctx) => {
  await ctx.t.stop();
});

parking('when an event cannot be applied, then it is parked with its reason, later events are applied, and health counts it', async ({ t }) => {
  const db = t.platform.deps.db;
  const device = await t.call('POST', '/api/iotnodes', { body: { name: 'victim' } });
  await sql`CREATE FUNCTION refuse_poison_row() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.doc->>'note' = 'poison' THEN RAISE EXCEPTION 'this row cannot be stored'; END IF; RETURN NEW; END $$`.execute(db);
  await sql`CREATE TRIGGER refuse_poison_row BEFORE UPDATE ON devices FOR EACH ROW EXECUTE FUNCTION refuse_poison_row()`.execute(db);
  try {
    const poisoned = await t.call('PUT', `/api/iotnodes/${device.body._id}`, { body: { note: 'poison' } });
    assert.ok(poisoned.status === 200 || poisoned.status === 503, poisoned.text);
    const { rows } = await sql<{ type: string; error: string }>`SELECT type, error FROM es.parked_events WHERE subscriber = 'read-models'`.execute(db);
    assert.equal(rows.map((r) => r.type), ['DeviceUpdated']);
    assert.match(rows[0]!.error, /this row cannot be stored/);
    const later = await t.call('PUT', `/api/iotnodes/${device.body._id}`, { body: { description: 'after the poison' } });
    assert.is(later.status, 200, later.text);
    assert.is(later.body.description, 'after the poison');
    assert.is(later.body.note, undefined);
    const other = await t.call('POST', '/api/dashboards', { body: { name: 'still served' } });
    assert.is(other.status, 201);
    const health = await t.call('GET', '/api/health', { token: null });
    assert.is(health.body.parkedEvents, 1);
    assert.ok(t.logs.some((l) => l.msg === 'an event could not be handled; it is set aside and the subscriber moves on'));
  } finally {
    await sql`DROP TRIGGER refuse_poison_row ON devices`.execute(db);
    await sql`DROP FUNCTION refuse_poison_row()`.execute(db);
  }
});

parking.run();
