import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, scopesOn } from '../access.js';
import type { Principal } from '../../domain/access/principal.js';
import {
  CALCULATION_NOT_FOUND,
  calculationDecider,
  calculationStream,
  checkDefinition,
  sourcesOf,
  withDefaults,
  type CalculationDefinition,
  type CalculationLink,
  type CalculationWrite,
} from '../../domain/calculations/calculation.js';
import { satisfies } from '../../domain/access/scopes.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import type { CalculationsTable } from '../../projections/calculations.js';

type Row = Pick<CalculationsTable, 'id' | 'definition' | 'created_by' | 'created_at' | 'updated_at' | 'halted' | 'halted_at' | 'last_value' | 'last_reported_at'>;

const COLUMNS = ['id', 'definition', 'created_by', 'created_at', 'updated_at', 'halted', 'halted_at', 'last_value', 'last_reported_at'] as const;

/** Calculations are created and replaced one at a time, so two of them can never close a cycle together. */
const LOCK = 'calculations';

const toCalculation = (row: Row) => ({
  _id: row.id,
  ...row.definition,
  createdBy: row.created_by,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
  status: row.halted === null ? 'running' : 'halted',
  ...(row.halted !== null ? { haltedReason: row.halted, haltedAt: row.halted_at!.toISOString() } : {}),
  lastResult: row.last_reported_at === null ? null : { value: row.last_value, reportedAt: row.last_reported_at.toISOString() },
});

/** The stored calculation, and with a `reader` only if that caller may read it. No row is 404, whatever the reason. */
async function selectCalculation(deps: Deps, id: string, reader?: Principal): Promise<Row> {
  let query = deps.db.selectFrom('calculations').select(COLUMNS).where('id', '=', id).where('deleted_at', 'is', null);
  if (reader) query = query.where(readableBy(reader, 'calculations.id'));
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError(CALCULATION_NOT_FOUND);
  return row;
}

/**
 * The body's rules in order: shape (OpenAPI, before the route), the domain's
 * rules, then the devices it names: each must exist (422), the caller must
 * read every source and write the destination (403). The cycle check is the
 * decider's, under the lock.
 */
async function checkedDefinition(deps: Deps, principal: Principal, written: CalculationWrite): Promise<CalculationDefinition> {
  const body = withDefaults(written);
  checkDefinition(body);
  const named = [...sourcesOf(body).map((s, i) => ({ ref: s, at: body.type === 'lastValue' ? `sources.${i}.deviceId` : 'source.deviceId', need: 'read' as const })), { ref: body.destination, at: 'destination.deviceId', need: 'write' as const }];
  const ids = [...new Set(named.map((n) => n.ref.deviceId))];
  const existing = new Set((await deps.db.selectFrom('devices').select('id').where('id', 'in', ids).execute()).map((r) => r.id));
  const missing = named.find((n) => !existing.has(n.ref.deviceId));
  if (missing) throw ValidationError.field(missing.at, `${missing.ref.deviceId} is not an iotnode`);
  const held = new Map(await Promise.all(ids.map(async (id) => [id, await scopesOn(deps, principal, id)] as const)));
  for (const n of named) {
    if (!satisfies(held.get(n.ref.deviceId)!, n.need)) {
      throw new ForbiddenError(`Forbidden: ${n.at} is iotnode ${n.ref.deviceId}, which you cannot ${n.need}; a calculation ${n.need === 'read' ? 'reads its sources' : 'writes its destination'} with its owner's rights`);
    }
  }
  return body;
}

/** Every other live calculation's sources and destination, for the cycle check. */
async function links(deps: Deps): Promise<CalculationLink[]> {
  const rows = await deps.db.selectFrom('calculations').select(['id', 'definition']).where('deleted_at', 'is', null).execute();
  return rows.map((r) => ({ id: r.id, name: r.definition.name, sources: sourcesOf(r.definition), destination: r.definition.destination }));
}

export function calculationRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/calculations', async (req, res) => {
    const principal = principalOf(req);
    const definition = await checkedDefinition(deps, principal, req.body as CalculationWrite);
    const id = newResourceId();
    await deps.locks.serialized(LOCK, async () => {
      const context = requestContext(deps, req);
      await write(deps, context, calculationStream(id), calculationDecider, { type: 'CreateCalculation', id, definition, createdBy: context.actor, others: await links(deps), at: context.now });
    });
    res.status(201).json(toCalculation(await selectCalculation(deps, id)));
  });

  router.get('/api/calculations', async (req, res) => {
    const { limit, offset, options } = req.query as unknown as { limit?: number; offset?: number; options?: string };
    const readable = readableBy(principalOf(req), 'calculations.id');
    const rows = await deps.db
      .selectFrom('calculations')
      .select(COLUMNS)
      .where('deleted_at', 'is', null)
      .where(readable)
      .orderBy('created_at')
      .orderBy('id')
      .limit(limit ?? 1000)
      .offset(offset ?? 0)
      .execute();
    if (options === 'count') {
      const { rows: count } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM calculations WHERE deleted_at IS NULL AND ${readable}`.execute(deps.db);
      res.setHeader('X-Total-Count', String(count[0]!.n));
    }
    res.json(rows.map(toCalculation));
  });

  router.get('/api/calculations/:id', async (req, res) => {
    res.json(toCalculation(await selectCalculation(deps, req.params.id as string, principalOf(req))));
  });

  router.put('/api/calculations/:id', async (req, res) => {
    const id = req.params.id as string;
    const principal = principalOf(req);
    await requireAccess(deps, principal, id, 'write', CALCULATION_NOT_FOUND);
    const definition = await checkedDefinition(deps, principal, req.body as CalculationWrite);
    await deps.locks.serialized(LOCK, async () => {
      const context = requestContext(deps, req);
      await write(deps, context, calculationStream(id), calculationDecider, { type: 'ReplaceCalculation', id, definition, others: await links(deps), at: context.now }, { retries: 3 });
    });
    res.json(toCalculation(await selectCalculation(deps, id)));
  });

  router.delete('/api/calculations/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', CALCULATION_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, calculationStream(id), calculationDecider, { type: 'DeleteCalculation', id, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  return router;
}
