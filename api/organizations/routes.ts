import { Router } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess, requireReference, scopesOn } from '../access.js';
import { isAdmin, type Principal } from '../../domain/access/principal.js';
import { pageOf, totalCount } from '../paging.js';
import { createUser } from '../users/create.js';
import { toUser } from '../users/routes.js';
import { loadCustomRoles } from '../../projections/access.js';
import type { OrganizationsTable } from '../../projections/organizations.js';
import type { UsersTable } from '../../projections/users.js';
import { isBuiltinRole } from '../../domain/access/roles.js';
import { satisfies } from '../../domain/access/scopes.js';
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { hashPassword, temporaryPassword } from '../../domain/users/password.js';
import { unitsOf, userDecider, userStream, type Profile, type Unit } from '../../domain/users/user.js';
import { MAX_DEPTH, ORGANIZATION_NOT_FOUND, checkUnitName, organizationDecider, organizationStream } from '../../domain/organizations/organization.js';

/**
 * Every change to the tree's shape or to unit names, and every join of a member, runs under this lock: names stay
 * unique, the tree acyclic, and a unit is never deleted while a member joins it.
 */
const TREE_LOCK = 'organization-tree';
const MEMBER_NOT_FOUND = 'Member not found';

type UnitRow = Pick<OrganizationsTable, 'id' | 'name' | 'description' | 'parent_id' | 'created_at' | 'updated_at'>;

const present = (row: UnitRow) => ({
  _id: row.id,
  name: row.name,
  ...(row.description !== null ? { description: row.description } : {}),
  parent: row.parent_id,
  createdAt: row.created_at.toISOString(),
  updatedAt: row.updated_at.toISOString(),
});

type MemberRow = Pick<UsersTable, 'id' | 'username' | 'profile' | 'created_at'>;

/** A member as an organization's admins see them: who they are and which units they belong to, never a password. */
const presentMember = (row: MemberRow) => ({
  id: row.id,
  username: row.username,
  ...(row.profile.firstName !== undefined ? { firstName: row.profile.firstName } : {}),
  ...(row.profile.lastName !== undefined ? { lastName: row.profile.lastName } : {}),
  ...(row.profile.email !== undefined ? { email: row.profile.email } : {}),
  enabled: row.profile.enabled,
  organization: unitsOf(row.profile),
});

/** Users whose `attributes.organization` names one of `names`. */
const belongsTo = (names: string[]) =>
  sql<boolean>`(jsonb_typeof(profile->'attributes'->'organization') = 'array' AND profile->'attributes'->'organization' ?| ${names}::text[])`;

export function organizationRoutes(deps: Deps): Router {
  const router = Router();
  const db = deps.db;

  const selectUnit = (id: string) => db.selectFrom('organizations').select(['id', 'name', 'description', 'parent_id', 'created_at', 'updated_at']).where('id', '=', id).executeTakeFirst();

  /** The unit as it is now, under the tree lock: a unit deleted while the caller waited for the lock is not found. */
  const unitStill = async (id: string): Promise<Unit> => {
    const row = await selectUnit(id);
    if (!row) throw new NotFoundError(ORGANIZATION_NOT_FOUND);
    return { id: row.id, name: row.name };
  };

  /** The unit at `id`, which the caller must hold `need` on (404 when it cannot read it). */
  const unitFor = async (principal: Principal, id: string, need: 'read' | 'write' | 'admin'): Promise<UnitRow> => {
    await requireAccess(deps, principal, id, need, ORGANIZATION_NOT_FOUND);
    const row = await selectUnit(id);
    if (!row) throw new NotFoundError(ORGANIZATION_NOT_FOUND);
    return row;
  };

  /**
   * A parent named in a body: a unit the caller administers, since the units
   * below it take part in the rights given to it. One 422 for a unit that does
   * not exist or that the caller cannot see.
   */
  const parentFor = async (principal: Principal, parent: string): Promise<Unit> => {
    const missing = ValidationError.field('parent', 'is not an organization unit you can see');
    await requireReference(deps, principal, parent, 'admin', missing);
    const row = await selectUnit(parent);
    if (!row) throw missing;
    return { id: row.id, name: row.name };
  };

  /** Levels from the top down to `id` (a top unit is level 1). */
  const levelOf = async (id: string) => Number((await db.selectFrom('organization_tree').select((eb) => eb.fn.max('depth').as('d')).where('unit_id', '=', id).executeTakeFirst())?.d ?? 0) + 1;
  /** Levels below `id` (0 for a unit without sub-units). */
  const heightOf = async (id: string) => Number((await db.selectFrom('organization_tree').select((eb) => eb.fn.max('depth').as('d')).where('ancestor_id', '=', id).executeTakeFirst())?.d ?? 0);

  /**
   * A name other units or their users already use. Only a platform admin may
   * create a unit for such a name: whoever holds the unit decides who its
   * members are, and so who holds the rights given to that name.
   */
  const nameInUse = async (name: string): Promise<boolean> => {
    const { rows } = await sql<{ used: boolean }>`SELECT
        EXISTS (SELECT 1 FROM access_rights WHERE subject_type = 'orgUnit' AND lower(subject_id) = lower(${name}))
        OR EXISTS (SELECT 1 FROM users u WHERE jsonb_typeof(u.profile->'attributes'->'organization') = 'array'
          AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(u.profile->'attributes'->'organization') x WHERE lower(x) = lower(${name}))) AS used`.execute(db);
    return rows[0]!.used;
  };

  // ---- units ----
  router.get('/api/organizations', async (req, res) => {
    const principal = principalOf(req);
    const page = pageOf(req);
    const parent = typeof req.query.parent === 'string' ? req.query.parent : undefined;
    let query = db.selectFrom('organizations').where(readableBy(principal, 'organizations.id'));
    if (parent) query = query.where('parent_id', '=', parent);
    const rows = await query.select(['id', 'name', 'description', 'parent_id', 'created_at', 'updated_at']).orderBy('name').orderBy('id').limit(page.limit).offset(page.offset).execute();
    await totalCount(res, page, async () => Number((await query.select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n));
    res.json(rows.map(present));
  });

  router.get('/api/organizations/:id', async (req, res) => {
    res.json(present(await unitFor(principalOf(req), req.params.id as string, 'read')));
  });

  router.post('/api/organizations', async (req, res) => {
    const principal = principalOf(req);
    const { name, description, parent } = req.body as { name: string; description?: string; parent?: string | null };
    checkUnitName(name);
    const parentRef = parent ? await parentFor(principal, parent) : null;
    const id = newResourceId();
    const context = requestContext(deps, req);
    await deps.locks.serialized(TREE_LOCK, async () => {
      if (await db.selectFrom('organizations').select('id').where(sql<boolean>`lower(name) = lower(${name})`).executeTakeFirst()) {
        throw new ConflictError('ERR - name is already the name of another organization unit');
      }
      if (!isAdmin(principal) && (await nameInUse(name))) {
        throw ValidationError.field('name', 'is already used in access rights or by users; only a platform admin can create a unit with it');
      }
      if (parentRef && (await levelOf(parentRef.id)) + 1 > MAX_DEPTH) throw ValidationError.field('parent', `is too deep: a tree has at most ${MAX_DEPTH} levels`);
      await write(deps, context, organizationStream(id), organizationDecider, { type: 'CreateOrganization', id, name, ...(description !== undefined ? { description } : {}), parent: parentRef, createdBy: context.actor, at: context.now });
    });
    res.status(201).json(present((await selectUnit(id))!));
  });

  router.put('/api/organizations/:id', async (req, res) => {
    const principal = principalOf(req);
    const id = req.params.id as string;
    const body = req.body as { name: string; description?: string; parent?: string | null };
    const { name, description } = body;
    const unit = await unitFor(principal, id, 'write');
    const context = requestContext(deps, req);
    await deps.locks.serialized(TREE_LOCK, async () => {
      const current = (await selectUnit(id)) ?? unit;
      // A move changes who holds rights, so it never happens by leaving `parent` out: left out, it stays.
      const parent = body.parent === undefined ? current.parent_id : body.parent;
      let parentRef: Unit | null = null;
      if (parent !== current.parent_id) {
        // Moving a unit changes who holds the rights given to the units above it, old and new: admin on all three.
        if (!satisfies(await scopesOn(deps, principal, id), 'admin')) throw new ForbiddenError();
        if (current.parent_id && !satisfies(await scopesOn(deps, principal, current.parent_id), 'admin')) throw new ForbiddenError();
        if (parent !== null) {
          parentRef = await parentFor(principal, parent);
          const cycle = await db.selectFrom('organization_tree').select('unit_id').where('ancestor_id', '=', id).where('unit_id', '=', parent).executeTakeFirst();
          if (cycle) throw ValidationError.field('parent', 'is the unit itself or one of its sub-units');
          if ((await levelOf(parent)) + 1 + (await heightOf(id)) > MAX_DEPTH) throw ValidationError.field('parent', `is too deep: a tree has at most ${MAX_DEPTH} levels`);
        }
      } else if (parent !== null) {
        const row = await selectUnit(parent);
        parentRef = row ? { id: row.id, name: row.name } : { id: parent, name: parent };
      }
      await write(deps, context, organizationStream(id), organizationDecider, { type: 'UpdateOrganization', id, name, ...(description !== undefined ? { description } : {}), parent: parentRef, at: context.now });
    });
    res.json(present((await selectUnit(id))!));
  });

  router.delete('/api/organizations/:id', async (req, res) => {
    const principal = principalOf(req);
    const id = req.params.id as string;
    const unit = await unitFor(principal, id, 'write');
    const context = requestContext(deps, req);
    await deps.locks.serialized(TREE_LOCK, async () => {
      if (await db.selectFrom('organizations').select('id').where('parent_id', '=', id).executeTakeFirst()) {
        throw new ConflictError('ERR - the unit has sub-units; move or delete them first');
      }
      if (await db.selectFrom('users').select('id').where(belongsTo([unit.name])).executeTakeFirst()) {
        throw new ConflictError('ERR - the unit has members; remove them first');
      }
      await write(deps, context, organizationStream(id), organizationDecider, { type: 'DeleteOrganization', id, at: context.now });
    });
    res.status(204).end();
  });

  // ---- members ----
  router.get('/api/organizations/:id/members', async (req, res) => {
    const unit = await unitFor(principalOf(req), req.params.id as string, 'read');
    const names = (req.query.includeDescendants as unknown) === true
      ? (await db.selectFrom('organization_tree').select('unit_name').where('ancestor_id', '=', unit.id).execute()).map((r) => r.unit_name)
      : [unit.name];
    const rows = await db.selectFrom('users').select(['id', 'username', 'profile', 'created_at']).where(belongsTo(names.length ? names : [unit.name])).orderBy('username').execute();
    res.json(rows.map(presentMember));
  });

  /** Creates a user who belongs to the unit, with a one-time password: how an organization's admin adds a member. */
  router.post('/api/organizations/:id/members', async (req, res) => {
    const principal = principalOf(req);
    const unit = await unitFor(principal, req.params.id as string, 'admin');
    const body = req.body as Omit<Partial<Profile>, 'attributes'> & { username: string; attributes?: Partial<Profile['attributes']> };
    const roles = body.attributes?.roles ?? [];
    await checkRoles(deps, principal, roles);
    const password = temporaryPassword();
    // Under the tree lock, as the unit stands then: a delete's "no members" check never misses a member joining.
    const userId = await deps.locks.serialized(TREE_LOCK, async () => {
      const current = await unitStill(unit.id);
      const profile: Profile = {
        ...body,
        enabled: body.enabled ?? true,
        requiredActions: [],
        attributes: { ...body.attributes, organization: [current.name] },
      };
      return createUser(deps, requestContext(deps, req), profile, password, true, current);
    });
    const row = await db.selectFrom('users').select(['id', 'username', 'profile', 'created_at']).where('id', '=', userId).executeTakeFirstOrThrow();
    res.status(201).json({ ...toUser(row), temporaryPassword: password });
  });

  /** Adds an existing user: a platform admin's call, since it puts someone else's account under the unit's admins. */
  router.put('/api/organizations/:id/members/:userId', async (req, res) => {
    const principal = principalOf(req);
    if (!isAdmin(principal)) throw new ForbiddenError();
    const unit = await unitFor(principal, req.params.id as string, 'admin');
    const userId = (req.params.userId as string).toLowerCase();
    const context = requestContext(deps, req);
    // Under the tree lock, as the unit stands then: a delete's "no members" check never misses a member joining.
    const { events } = await deps.locks.serialized(TREE_LOCK, async () => {
      const current = await unitStill(unit.id);
      return write(deps, context, userStream(userId), userDecider, { type: 'JoinOrganization', id: userId, organization: current, at: context.now });
    });
    const row = await db.selectFrom('users').select(['id', 'username', 'profile', 'created_at']).where('id', '=', userId).executeTakeFirstOrThrow();
    res.status(events.length ? 201 : 200).json(presentMember(row));
  });

  router.delete('/api/organizations/:id/members/:userId', async (req, res) => {
    const unit = await unitFor(principalOf(req), req.params.id as string, 'admin');
    const userId = (req.params.userId as string).toLowerCase();
    const context = requestContext(deps, req);
    await write(deps, context, userStream(userId), userDecider, { type: 'LeaveOrganization', id: userId, organization: { id: unit.id, name: unit.name }, at: context.now }).catch((error) => {
      throw error instanceof NotFoundError ? new NotFoundError(MEMBER_NOT_FOUND) : error;
    });
    res.status(204).end();
  });

  /**
   * A new one-time password for a member. The unit's admins may reset it only
   * when the member belongs to no unit they do not administer and is no
   * platform admin: otherwise the reset would open another organization's
   * rights, or the platform's, to them.
   */
  router.post('/api/organizations/:id/members/:userId/reset-password', async (req, res) => {
    const principal = principalOf(req);
    const unit = await unitFor(principal, req.params.id as string, 'admin');
    const userId = (req.params.userId as string).toLowerCase();
    const member = await db.selectFrom('users').select(['id', 'profile']).where('id', '=', userId).executeTakeFirst();
    if (!member || !unitsOf(member.profile).includes(unit.name)) throw new NotFoundError(MEMBER_NOT_FOUND);
    if (!isAdmin(principal)) {
      if ((member.profile.attributes.roles ?? []).includes('admin')) throw new ForbiddenError();
      for (const name of unitsOf(member.profile)) {
        const other = await db.selectFrom('organizations').select('id').where('name', '=', name).executeTakeFirst();
        if (!other || !satisfies(await scopesOn(deps, principal, other.id), 'admin')) throw new ForbiddenError();
      }
    }
    const password = temporaryPassword();
    const context = requestContext(deps, req);
    await write(deps, context, userStream(userId), userDecider, { type: 'ResetPassword', id: userId, passwordHash: await hashPassword(password), organization: { id: unit.id, name: unit.name }, at: context.now });
    res.json({ temporaryPassword: password });
  });

  return router;
}

/**
 * A member's roles must exist and, unless a platform admin creates the
 * member, be roles the creator holds: nobody hands out more than they have.
 */
async function checkRoles(deps: Deps, principal: Principal, roles: string[]): Promise<void> {
  const custom = await loadCustomRoles(deps.db, roles);
  for (const [i, role] of roles.entries()) {
    if (!isBuiltinRole(role) && !custom.has(role)) throw ValidationError.field(`attributes.roles.${i}`, `${role} is not a role`);
    if (!isAdmin(principal) && !principal.roles.includes(role)) throw new ForbiddenError();
  }
}
