/**
 * The windows kept in memory compare `reportedAt` to the microsecond, as
 * `timestamptz` does: their reading of an ISO 8601 time agrees with
 * PostgreSQL's, and a form they cannot place exactly is refused (the
 * series is then left to the database) rather than guessed.
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import pg from 'pg';
import { createTestDatabase } from '../support/cluster.js';
import { isoOfMicros, micros } from '../../reactors/calculations/windows.js';

const times = suite<{ pool: pg.Pool }>('reportedAt to the microsecond');

times.before(async (ctx) => {
  ctx.pool = new pg.Pool({ connectionString: await createTestDatabase(), max: 2 });
});
times.after(async (ctx) => {
  await ctx.pool.end();
});

times('given times as the platform stores them, with up to six decimals, then memory reads them as PostgreSQL does', async ({ pool }) => {
  const samples = [
    '2026-11-24T10:00:00.000Z',
    '2026-11-24T10:00:00Z',
    '2026-11-24T10:00:00.5Z',
    '2026-11-24T10:00:00.123456Z',
    '2026-11-24T23:59:59.999999Z',
    '1970-01-01T00:00:00.000001Z',
    '1969-12-31T23:59:59.999999Z',
    '2000-02-29T12:00:00.010Z',
    '2200-01-01T00:00:00.000Z',
  ];
  const { rows } = await pool.query<{ us: string }>('SELECT (extract(epoch FROM t::timestamptz) * 1000000)::bigint::text AS us FROM unnest($1::text[]) AS t', [samples]);
  samples.forEach((iso, i) => assert.is(micros(iso), Number(rows[i]!.us), iso));
  for (const iso of samples) assert.is(micros(isoOfMicros(micros(iso))), micros(iso), `${iso} round trip`);
  const back = await pool.query<{ same: boolean }>('SELECT $1::timestamptz = $2::timestamptz AS same', [isoOfMicros(micros(samples[3]!)), samples[3]]);
  assert.ok(back.rows[0]!.same, 'the seed bound PostgreSQL reads is the same instant');
});

times('given a form memory cannot place exactly, then it is refused, never guessed', () => {
  for (const iso of [
    '2026-11-24T10:00:00.1234567Z', // more than a microsecond's digits: PostgreSQL rounds them
    '2026-11-24T11:00:00+01:00', // an offset
    '2026-11-24T10:00:00', // no zone: the session's time zone would decide
    '2026-02-30T10:00:00.000Z', // a day that does not exist
    '2026-12-31T23:59:60.000Z', // a leap second
    '+275760-09-13T00:00:00.000Z', // a year past four digits
    '2600-01-01T00:00:00.000Z', // past the microseconds a double counts exactly
    'yesterday',
  ]) {
    assert.ok(Number.isNaN(micros(iso)), iso);
  }
});

times.run();
