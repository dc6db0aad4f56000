import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess } from '../access.js';
import { appVisibleTo } from '../apps/visibility.js';
import type { Principal } from '../../domain/access/principal.js';
import { ValidationError } from '../../domain/shared/errors.js';
import { usergroupDecider, usergroupStream } from '../../domain/usergroups/usergroup.js';

const NOT_FOUND = 'Usergroup not found';

/**
 * A usergroup's app filter: with one, the group's members see only the apps
 * it lists (an empty list: none); without one, the group restricts nothing.
 * Reading it needs read on the group, changing it write. Only apps the caller
 * can see may be listed, so a filter never tells whether someone else's app
 * exists.
 */
export function appFilterRoutes(deps: Deps): Router {
  const router = Router();

  const filterOf = async (id: string) => {
    const row = await deps.db.selectFrom('usergroups').select('app_filter').where('id', '=', id).executeTakeFirstOrThrow();
    return { groupId: id, filtered: row.app_filter !== null, appIds: row.app_filter ?? [] };
  };

  /** The apps among `ids` the caller can see; the first one it cannot is a 422 naming its place in the body. */
  const checkApps = async (principal: Principal, ids: string[], field: (i: number) => string) => {
    if (ids.length === 0) return;
    const rows = await deps.db.selectFrom('apps').select('id').where('id', 'in', ids).where(appVisibleTo(principal, 'apps.id')).execute();
    const visible = new Set(rows.map((r) => r.id));
    const i = ids.findIndex((id) => !visible.has(id));
    if (i >= 0) throw ValidationError.field(field(i), 'is not an app you can see');
  };

  router.get('/api/usergroups/:groupId/app-filter', async (req, res) => {
    const id = req.params.groupId as string;
    await requireAccess(deps, principalOf(req), id, 'read', NOT_FOUND);
    res.json(await filterOf(id));
  });

  router.put('/api/usergroups/:groupId/app-filter', async (req, res) => {
    const principal = principalOf(req);
    const id = req.params.groupId as string;
    const { appIds } = req.body as { appIds: string[] };
    await requireAccess(deps, principal, id, 'write', NOT_FOUND);
    await checkApps(principal, appIds, (i) => `appIds.${i}`);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'SetAppFilter', id, appIds, at: context.now }, { retries: 3 });
    res.json(await filterOf(id));
  });

  router.post('/api/usergroups/:groupId/app-filter', async (req, res) => {
    const principal = principalOf(req);
    const id = req.params.groupId as string;
    const { appId } = req.body as { appId: string };
    await requireAccess(deps, principal, id, 'write', NOT_FOUND);
    await checkApps(principal, [appId], () => 'appId');
    const context = requestContext(deps, req);
    const { events } = await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'AllowApp', id, appId, at: context.now }, { retries: 3 });
    res.status(events.length ? 201 : 200).json(await filterOf(id));
  });

  router.delete('/api/usergroups/:groupId/app-filter/:appId', async (req, res) => {
    const id = req.params.groupId as string;
    await requireAccess(deps, principalOf(req), id, 'write', NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'DisallowApp', id, appId: req.params.appId as string, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  router.delete('/api/usergroups/:groupId/app-filter', async (req, res) => {
    const id = req.params.groupId as string;
    await requireAccess(deps, principalOf(req), id, 'write', NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'RemoveAppFilter', id, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  return router;
}
