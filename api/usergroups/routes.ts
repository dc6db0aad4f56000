import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import { NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { usergroupDecider, usergroupStream, type UsergroupChanges } from '../../domain/usergroups/usergroup.js';
import type { UsergroupsTable } from '../../projections/usergroups.js';

const NOT_FOUND = 'Usergroup not found';

const toGroup = (row: Pick<UsergroupsTable, 'id' | 'name' | 'owner'>) => ({ _id: row.id, name: row.name, owner: row.owner });

const selectGroup = (deps: Deps, id: string) => deps.db.selectFrom('usergroups').select(['id', 'name', 'owner']).where('id', '=', id).executeTakeFirstOrThrow();

/** The username of an existing user, or undefined; events name members by both, so the group's log reads well. */
async function usernameOf(deps: Deps, id: string): Promise<string | undefined> {
  return (await deps.db.selectFrom('users').select('username').where('id', '=', id).executeTakeFirst())?.username;
}

async function isMember(deps: Deps, groupId: string, userId: string): Promise<boolean> {
  return !!(await deps.db.selectFrom('usergroup_members').select('user_id').where('group_id', '=', groupId).where('user_id', '=', userId).executeTakeFirst());
}

export function usergroupRoutes(deps: Deps): Router {
  const router = Router();

  // `members` and `appFilter` in the body are accepted and ignored: they are managed through their own endpoints.
  // `owner` (the contract lists it) is the creator: accepted when it names the caller, refused otherwise, for
  // admins too; a group changes owner afterwards, by PATCH, with admin access to it.
  router.post('/api/usergroups', async (req, res) => {
    const { name, owner } = req.body as { name: string; owner?: string };
    const id = newResourceId();
    const context = requestContext(deps, req);
    if (owner !== undefined && owner.toLowerCase() !== context.actor.toLowerCase()) {
      throw ValidationError.field('owner', 'must be you, the creator: a usergroup is created owned by its creator; hand it over afterwards with PATCH /api/usergroups/{id} {owner}');
    }
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'CreateUsergroup', id, name, createdBy: context.actor, at: context.now });
    res.status(201).json(toGroup(await selectGroup(deps, id)));
  });

  router.get('/api/usergroups', async (req, res) => {
    const rows = await deps.db
      .selectFrom('usergroups')
      .select(['id', 'name', 'owner'])
      .where((eb) => eb.or([readableBy(principalOf(req), 'usergroups.id'), eb('id', 'in', eb.selectFrom('usergroup_members').select('group_id').where('user_id', '=', principalOf(req).id))]))
      .orderBy('name')
      .orderBy('id')
      .execute();
    res.json(rows.map(toGroup));
  });

  router.get('/api/usergroups/:id', async (req, res) => {
    const id = req.params.id as string;
    // Members see the groups they are in, whoever put them there, so they can leave one.
    if (!(await isMember(deps, id, principalOf(req).id))) await requireAccess(deps, principalOf(req), id, 'read', NOT_FOUND);
    const group = toGroup(await selectGroup(deps, id));
    if ((req.query.includeMembers as unknown) !== true) return void res.json(group);
    const members = await deps.db
      .selectFrom('usergroup_members as m')
      .innerJoin('users as u', 'u.id', 'm.user_id')
      .select(['u.id', 'u.username'])
      .where('m.group_id', '=', id)
      .orderBy('u.username')
      .execute();
    res.json({ ...group, members });
  });

  router.patch('/api/usergroups/:id', async (req, res) => {
    const id = req.params.id as string;
    const changes = req.body as UsergroupChanges;
    if (changes.owner) changes.owner = changes.owner.toLowerCase();
    // Handing the group to another owner is an admin's decision; renaming needs write.
    await requireAccess(deps, principalOf(req), id, changes.owner !== undefined ? 'admin' : 'write', NOT_FOUND);
    const ownerUsername = changes.owner !== undefined ? await usernameOf(deps, changes.owner) : undefined;
    if (changes.owner !== undefined && ownerUsername === undefined) throw ValidationError.field('owner', 'is not a user');
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'UpdateUsergroup', id, changes, ...(ownerUsername !== undefined ? { ownerUsername } : {}), at: context.now });
    res.json(toGroup(await selectGroup(deps, id)));
  });

  router.delete('/api/usergroups/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'write', NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'DeleteUsergroup', id, at: context.now });
    res.status(204).end();
  });

  router.post('/api/usergroups/:groupId/members', async (req, res) => {
    const id = req.params.groupId as string;
    const userId = (req.body as { userId: string }).userId.toLowerCase();
    await requireAccess(deps, principalOf(req), id, 'write', NOT_FOUND);
    const username = await usernameOf(deps, userId);
    if (username === undefined) throw ValidationError.field('userId', 'is not a user');
    const context = requestContext(deps, req);
    const { events } = await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'AddMember', id, userId, username, at: context.now }, { retries: 3 });
    res.status(events.length ? 201 : 200).json({ groupId: id, userId });
  });

  router.delete('/api/usergroups/:groupId/members/:memberId', async (req, res) => {
    const id = req.params.groupId as string;
    const userId = (req.params.memberId as string).toLowerCase();
    await requireAccess(deps, principalOf(req), id, 'write', NOT_FOUND);
    const username = await usernameOf(deps, userId);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'RemoveMember', id, userId, ...(username !== undefined ? { username } : {}), at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  router.delete('/api/usergroups/:groupId/membership', async (req, res) => {
    const id = req.params.groupId as string;
    const principal = principalOf(req);
    if (!(await isMember(deps, id, principal.id))) throw new NotFoundError(NOT_FOUND);
    const context = requestContext(deps, req);
    await write(deps, context, usergroupStream(id), usergroupDecider, { type: 'RemoveMember', id, userId: principal.id, username: principal.username, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  return router;
}

