import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import { isAdmin, type Principal } from '../../domain/access/principal.js';
import { pageOf, totalCount } from '../paging.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { LOCATION_NOT_FOUND, checkLocation, locationDecider, locationStream, type Location } from '../../domain/locations/location.js';
import type { LocationsTable } from '../../projections/locations.js';

type Body = Omit<Location, 'user'> & { user?: string };

/** The location a body describes; `_id`, `createdAt` and `updatedAt`, as a read gives them, are not part of it. */
function bodyOf(raw: unknown): Body {
  const { _id, createdAt, updatedAt, ...body } = raw as Body & { _id?: unknown; createdAt?: unknown; updatedAt?: unknown };
  return body;
}

const present = (row: Pick<LocationsTable, 'id' | 'doc' | 'created_at' | 'updated_at'>) => ({
  _id: row.id,
  ...row.doc,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

const selectLocation = (deps: Deps, id: string) =>
  deps.db.selectFrom('locations').select(['id', 'doc', 'user_id', 'created_at', 'updated_at']).where('id', '=', id).executeTakeFirstOrThrow();

/**
 * `user`, the creating user: the caller when left out (on a replace, the one
 * stored). Naming anyone else is for platform admins, who manage every
 * account; for others it is 422.
 */
async function userOf(deps: Deps, principal: Principal, given: string | undefined, stored?: string): Promise<string> {
  if (given === undefined) return stored ?? principal.id;
  const id = given.toLowerCase();
  if (id === principal.id || id === stored) return id;
  if (isAdmin(principal) && (await deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst())) return id;
  throw ValidationError.field('user', 'must be your own user id: it names the user who created the location');
}

/** Every item's device must be one the caller can read: a location shows its devices' values. One query for all of them. */
async function checkDevices(deps: Deps, principal: Principal, location: Location): Promise<void> {
  const layers: [string, Location['defaultLayer']][] = [['defaultLayer', location.defaultLayer], ...(location.layers ?? []).map((l, i) => [`layers.${i}`, l] as [string, Location['defaultLayer']])];
  const ids = [...new Set(layers.flatMap(([, l]) => (l.items ?? []).map((item) => item.deviceId)))];
  if (ids.length === 0) return;
  const rows = await deps.db.selectFrom('devices').select('id').where('id', 'in', ids).where(readableBy(principal, 'devices.id')).execute();
  const readable = new Set(rows.map((r) => r.id));
  for (const [field, layer] of layers) {
    for (const [i, item] of (layer.items ?? []).entries()) {
      if (!readable.has(item.deviceId)) throw ValidationError.field(`${field}.items.${i}.deviceId`, 'is not an iotnode you can read');
    }
  }
}

/** Locations: deprecated, kept for old integrations (docs/locations.md); every operation is marked deprecated in the document. */
export function locationRoutes(deps: Deps): Router {
  const router = Router();

  router.get('/api/locations', async (req, res) => {
    const principal = principalOf(req);
    const page = pageOf(req);
    const visible = readableBy(principal, 'locations.id');
    const rows = await deps.db
      .selectFrom('locations')
      .select(['id', 'doc', 'created_at', 'updated_at'])
      .where(visible)
      .orderBy('name')
      .orderBy('id')
      .limit(page.limit)
      .offset(page.offset)
      .execute();
    await totalCount(res, page, async () => Number((await deps.db.selectFrom('locations').select((eb) => eb.fn.countAll().as('n')).where(visible).executeTakeFirstOrThrow()).n));
    res.json(rows.map(present));
  });

  router.get('/api/locations/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'read', LOCATION_NOT_FOUND);
    res.json(present(await selectLocation(deps, id)));
  });

  router.post('/api/locations', async (req, res) => {
    const principal = principalOf(req);
    const body = bodyOf(req.body);
    const location = checkLocation({ ...body, user: await userOf(deps, principal, body.user) });
    await checkDevices(deps, principal, location);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, locationStream(id), locationDecider, { type: 'CreateLocation', id, createdBy: context.actor, location, at: context.now });
    res.status(201).json(present(await selectLocation(deps, id)));
  });

  router.put('/api/locations/:id', async (req, res) => {
    const principal = principalOf(req);
    const id = req.params.id as string;
    await requireAccess(deps, principal, id, 'write', LOCATION_NOT_FOUND);
    const stored = await selectLocation(deps, id);
    const body = bodyOf(req.body);
    const location = checkLocation({ ...body, user: await userOf(deps, principal, body.user, stored.user_id) });
    await checkDevices(deps, principal, location);
    const context = requestContext(deps, req);
    await write(deps, context, locationStream(id), locationDecider, { type: 'ReplaceLocation', id, location, at: context.now });
    res.json(present(await selectLocation(deps, id)));
  });

  router.delete('/api/locations/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', LOCATION_NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, locationStream(id), locationDecider, { type: 'DeleteLocation', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
