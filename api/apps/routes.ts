import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { pageOf, totalCount } from '../paging.js';
import { appVisibleTo, requireApp } from './visibility.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { hashPassword } from '../../domain/users/password.js';
import { appDecider, appStream, newAppSecret } from '../../domain/apps/app.js';
import type { AppsTable } from '../../projections/apps.js';

type AppRow = Pick<AppsTable, 'id' | 'name' | 'description' | 'created_at' | 'updated_at'>;

/** An app as every read shows it: never its secret or the secret's hash. */
const present = (row: AppRow) => ({
  _id: row.id,
  name: row.name,
  ...(row.description !== null ? { description: row.description } : {}),
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

/** Client apps: an id and a secret to log in to MQTT with, as a channel's recipient (docs/access.md, docs/mqtt.md). */
export function appRoutes(deps: Deps): Router {
  const router = Router();
  const selectApp = (id: string) => deps.db.selectFrom('apps').select(['id', 'name', 'description', 'created_at', 'updated_at']).where('id', '=', id).executeTakeFirstOrThrow();

  router.get('/api/apps', async (req, res) => {
    const page = pageOf(req);
    const query = deps.db.selectFrom('apps').where(appVisibleTo(principalOf(req), 'apps.id'));
    const rows = await query.select(['id', 'name', 'description', 'created_at', 'updated_at']).orderBy('name').orderBy('id').limit(page.limit).offset(page.offset).execute();
    await totalCount(res, page, async () => Number((await query.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n));
    res.json(rows.map(present));
  });

  router.get('/api/apps/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireApp(deps, principalOf(req), id, 'read');
    res.json(present(await selectApp(id)));
  });

  // The secret is shown here and by a rotation, once; only its hash is stored.
  router.post('/api/apps', async (req, res) => {
    const { name, description } = req.body as { name: string; description?: string };
    const id = newResourceId();
    const secret = newAppSecret();
    const context = requestContext(deps, req);
    await write(deps, context, appStream(id), appDecider, { type: 'CreateApp', id, name, ...(description !== undefined ? { description } : {}), secretHash: await hashPassword(secret), createdBy: context.actor, at: context.now });
    res.status(201).json({ ...present(await selectApp(id)), secret });
  });

  router.put('/api/apps/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireApp(deps, principalOf(req), id, 'write');
    const { name, description } = req.body as { name: string; description?: string };
    const context = requestContext(deps, req);
    await write(deps, context, appStream(id), appDecider, { type: 'UpdateApp', id, name, ...(description !== undefined ? { description } : {}), at: context.now });
    res.json(present(await selectApp(id)));
  });

  /** A new secret; the old one stops working and the app's open MQTT connections are closed. */
  router.post('/api/apps/:id/secret', async (req, res) => {
    const id = req.params.id as string;
    await requireApp(deps, principalOf(req), id, 'write');
    const secret = newAppSecret();
    const context = requestContext(deps, req);
    await write(deps, context, appStream(id), appDecider, { type: 'RotateAppSecret', id, secretHash: await hashPassword(secret), at: context.now });
    res.json({ _id: id, secret });
  });

  router.delete('/api/apps/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireApp(deps, principalOf(req), id, 'write');
    const context = requestContext(deps, req);
    await write(deps, context, appStream(id), appDecider, { type: 'DeleteApp', id, at: context.now });
    res.status(204).end();
  });

  return router;
}
