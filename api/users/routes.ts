import { Router, type Request } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { readModelsInclude, requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { isAdmin, type Principal } from '../../domain/access/principal.js';
import { createUser } from './create.js';
import { loadCustomRoles } from '../../projections/access.js';
import type { UsersTable } from '../../projections/users.js';
import { isBuiltinRole } from '../../domain/access/roles.js';
import { ForbiddenError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { hashPassword, temporaryPassword } from '../../domain/users/password.js';
import { userDecider, userStream, type Profile } from '../../domain/users/user.js';
import { handle } from '../../domain/shared/decider.js';
import { usernameDecider, usernameKey, usernameStream } from '../../domain/users/username.js';

type UserRow = Pick<UsersTable, 'id' | 'username' | 'profile' | 'created_at'>;

/** The user as the API shows it: the profile in the identity provider's style, never a password or hash. */
export function toUser(row: UserRow) {
  const { username: _, ...profile } = row.profile;
  return { id: row.id, username: row.username, ...profile, createdTimestamp: row.created_at.getTime() };
}

/** What another, non-admin user sees of a user found by search. */
const toPublicUser = (row: UserRow) => ({ id: row.id, username: row.username, firstName: row.profile.firstName, lastName: row.profile.lastName });

/** Fields only an admin may change, since they widen what the user may do. */
function touchesPrivileged(changes: Partial<Profile>): boolean {
  return 'enabled' in changes || 'requiredActions' in changes || (!!changes.attributes && ('roles' in changes.attributes || 'organization' in changes.attributes));
}

async function checkRolesExist(deps: Deps, roles: string[] | undefined): Promise<void> {
  if (!roles) return;
  const custom = await loadCustomRoles(deps.db, roles);
  const index = roles.findIndex((r) => !isBuiltinRole(r) && !custom.has(r));
  if (index >= 0) throw ValidationError.field(`attributes.roles.${index}`, `${roles[index]} is not a role`);
}

const selectUser = (deps: Deps, id: string) =>
  deps.db.selectFrom('users').select(['id', 'username', 'profile', 'created_at', 'password_hash']).where('id', '=', id).executeTakeFirst();

/** A user the caller may see and change: themselves, or anyone for an admin. Others are reported missing. */
async function ownOrAdmin(deps: Deps, principal: Principal, id: string) {
  const row = principal.id === id || isAdmin(principal) ? await selectUser(deps, id) : undefined;
  if (!row) throw new NotFoundError('User not found');
  return row;
}

function requireAdmin(req: Request): Principal {
  const principal = principalOf(req);
  if (!isAdmin(principal)) throw new ForbiddenError();
  return principal;
}

export function userRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/users', async (req, res) => {
    requireAdmin(req);
    const body = req.body as Partial<Profile> & { username: string };
    await checkRolesExist(deps, body.attributes?.roles);
    const profile: Profile = { ...body, enabled: body.enabled ?? true, requiredActions: body.requiredActions ?? [], attributes: body.attributes ?? {} };
    const password = temporaryPassword();
    const id = await createUser(deps, requestContext(deps, req), profile, password, true);
    const row = await selectUser(deps, id);
    res.status(201).json({ ...toUser(row!), temporaryPassword: password });
  });

  router.get('/api/users', async (req, res) => {
    const principal = principalOf(req);
    const { username, limit } = req.query as { username?: string; limit?: number };
    let query = deps.db.selectFrom('users').select(['id', 'username', 'profile', 'created_at']).orderBy('username').limit(limit ?? 100);
    if (username) query = query.where(sql<boolean>`strpos(username_key, ${usernameKey(username)}) > 0`);
    const admin = isAdmin(principal);
    if (!admin) query = query.where(sql<boolean>`(profile->'attributes'->>'globalVisibility' IS DISTINCT FROM 'false' OR id = ${principal.id}::uuid)`);
    const rows = await query.execute();
    res.json(rows.map((row) => (admin || row.id === principal.id ? toUser(row) : toPublicUser(row))));
  });

  router.get('/api/users/:id', async (req, res) => {
    const row = await ownOrAdmin(deps, principalOf(req), (req.params.id as string).toLowerCase());
    res.json(toUser(row));
  });

  router.patch('/api/users/:id', async (req, res) => {
    const principal = principalOf(req);
    const id = (req.params.id as string).toLowerCase();
    await ownOrAdmin(deps, principal, id);
    const changes = req.body as Partial<Omit<Profile, 'username'>>;
    if (!isAdmin(principal) && touchesPrivileged(changes)) throw new ForbiddenError();
    await checkRolesExist(deps, changes.attributes?.roles);
    const context = requestContext(deps, req);
    await write(deps, context, userStream(id), userDecider, { type: 'UpdateUser', id, changes, at: context.now });
    res.json(toUser((await selectUser(deps, id))!));
  });

  router.delete('/api/users/:id', async (req, res) => {
    const id = (req.params.id as string).toLowerCase();
    const row = await ownOrAdmin(deps, principalOf(req), id);
    const context = requestContext(deps, req);
    // Delete first, then free the name: a crash in between leaves the name held by a deleted user (the next creation
    // of that name releases it, `createUser`), never two live users with one name.
    // Both are stored before waiting for the read models, so a slow projection cannot keep the name taken.
    const deleted = await handle(deps.store, userStream(id), userDecider, { type: 'DeleteUser', id, at: context.now }, context);
    const released = await handle(deps.store, usernameStream(row.username), usernameDecider, { type: 'Release', username: row.username, userId: id }, context);
    const last = released.result ?? deleted.result;
    if (last) await readModelsInclude(deps, last.position);
    res.status(204).end();
  });

  router.post('/api/users/:id/reset-password', async (req, res) => {
    requireAdmin(req);
    const id = (req.params.id as string).toLowerCase();
    if (!(await selectUser(deps, id))) throw new NotFoundError('User not found');
    const password = temporaryPassword();
    const context = requestContext(deps, req);
    await write(deps, context, userStream(id), userDecider, { type: 'ResetPassword', id, passwordHash: await hashPassword(password), at: context.now });
    res.json({ temporaryPassword: password });
  });

  return router;
}
