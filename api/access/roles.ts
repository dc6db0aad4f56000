import { Router, type Request } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { isAdmin } from '../../domain/access/principal.js';
import { BUILTIN_ROLES, RESOURCE_TYPES, builtinMethods, isBuiltinRole, type BuiltinRole, type Permissions } from '../../domain/access/roles.js';
import { roleDecider, roleStream } from '../../domain/access/customRoles.js';
import { ForbiddenError, NotFoundError } from '../../domain/shared/errors.js';

const builtin = (name: BuiltinRole) => ({
  name,
  builtin: true,
  permissions: Object.fromEntries(RESOURCE_TYPES.map((r) => [r, builtinMethods(name, r)])) as Permissions,
});

/** Managing roles widens what users may do, so only admins do it, whatever a custom role says. */
function requireAdmin(req: Request): void {
  if (!isAdmin(principalOf(req))) throw new ForbiddenError();
}

export function roleRoutes(deps: Deps): Router {
  const router = Router();

  router.get('/api/roles', async (_req, res) => {
    const custom = await deps.db.selectFrom('roles').select(['name', 'permissions']).orderBy('name').execute();
    res.json([...BUILTIN_ROLES.map(builtin), ...custom.map((r) => ({ name: r.name, builtin: false, permissions: r.permissions }))]);
  });

  router.get('/api/roles/:name', async (req, res) => {
    const name = req.params.name as string;
    if (isBuiltinRole(name)) return void res.json(builtin(name));
    const row = await deps.db.selectFrom('roles').select(['name', 'permissions']).where('name', '=', name).executeTakeFirst();
    if (!row) throw new NotFoundError('Role not found');
    res.json({ name: row.name, builtin: false, permissions: row.permissions });
  });

  router.post('/api/roles', async (req, res) => {
    requireAdmin(req);
    const { name, permissions } = req.body as { name: string; permissions: Permissions };
    const context = requestContext(deps, req);
    await write(deps, context, roleStream(name), roleDecider, { type: 'CreateRole', name, permissions, at: context.now });
    res.status(201).json({ name, builtin: false, permissions });
  });

  router.put('/api/roles/:name', async (req, res) => {
    requireAdmin(req);
    const name = req.params.name as string;
    const { permissions } = req.body as { permissions: Permissions };
    const context = requestContext(deps, req);
    await write(deps, context, roleStream(name), roleDecider, { type: 'ReplaceRole', name, permissions, at: context.now });
    res.json({ name, builtin: false, permissions });
  });

  router.delete('/api/roles/:name', async (req, res) => {
    requireAdmin(req);
    const name = req.params.name as string;
    const context = requestContext(deps, req);
    await write(deps, context, roleStream(name), roleDecider, { type: 'DeleteRole', name, at: context.now });
    res.status(204).end();
  });

  return router;
}
