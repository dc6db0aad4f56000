import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess, scopesOn } from '../access.js';
import { isAdmin } from '../../domain/access/principal.js';
import { RIGHTS_EVENTS, accessDecider, accessStream, canonicalSubjectType, checkSubject, evolveRights, type Rights, type SubjectType, type SubjectTypeInput } from '../../domain/access/rights.js';
import { logStream } from '../../domain/logs/logEntry.js';
import { readMatching } from '../../domain/eventstore/filter.js';
import { revisions } from '../../domain/audit/history.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { satisfies, type Scope } from '../../domain/access/scopes.js';
import { NotFoundError, ValidationError } from '../../domain/shared/errors.js';
import type { AccessRightsTable } from '../../projections/access.js';

interface RecordBody {
  resourceType: string;
  resourceId: string;
  subjectType: SubjectTypeInput;
  subjectId: string;
  scope?: Scope[];
}

/** A record as the API shows it: one user is the subject type `singleton`. */
export const toRecord = (row: AccessRightsTable) => ({
  resourceType: row.resource_type,
  resourceId: row.resource_id,
  subjectType: row.subject_type === 'user' ? 'singleton' : row.subject_type,
  subjectId: row.subject_id,
  scope: row.scope,
});

/** The subject must be of the right id kind and, for users and groups, exist. */
async function checkSubjectExists(deps: Deps, type: SubjectType, id: string): Promise<void> {
  checkSubject(type, id);
  if (type === 'user' && !(await deps.db.selectFrom('users').select('id').where('id', '=', id).executeTakeFirst())) {
    throw ValidationError.field('subjectId', 'is not a user');
  }
  if (type === 'group' && !(await deps.db.selectFrom('usergroups').select('id').where('id', '=', id).executeTakeFirst())) {
    throw ValidationError.field('subjectId', 'is not a usergroup');
  }
}

/** The resource type the rights on a resource were recorded with (set by the creator rule). */
async function checkResourceType(deps: Deps, resourceId: string, resourceType: string): Promise<void> {
  const row = await deps.db.selectFrom('access_rights').select('resource_type').where('resource_id', '=', resourceId).limit(1).executeTakeFirst();
  if (row && row.resource_type !== resourceType) throw ValidationError.field('resourceType', `does not match the resource, which is a ${row.resource_type}`);
}

export function accessRightRoutes(deps: Deps): Router {
  const router = Router();

  router.post('/api/access-rights', async (req, res) => {
    const principal = principalOf(req);
    const body = req.body as RecordBody;
    const subjectType = canonicalSubjectType(body.subjectType);
    checkSubject(subjectType, body.subjectId);
    await requireAccess(deps, principal, body.resourceId, 'admin');
    await checkResourceType(deps, body.resourceId, body.resourceType);
    await checkSubjectExists(deps, subjectType, subjectType === 'user' ? body.subjectId.toLowerCase() : body.subjectId);
    const context = requestContext(deps, req);
    const { events } = await write(deps, context, accessStream(body.resourceId), accessDecider, { type: 'Grant', ...body, at: context.now }, { retries: 3 });
    const { at: _, ...record } = events[0]!.data;
    res.status(201).json(toRecord({ resource_type: record.resourceType, resource_id: record.resourceId, subject_type: record.subjectType, subject_id: record.subjectId, scope: record.scope }));
  });

  router.delete('/api/access-rights', async (req, res) => {
    const principal = principalOf(req);
    const body = req.body as RecordBody;
    checkSubject(canonicalSubjectType(body.subjectType), body.subjectId);
    await requireAccess(deps, principal, body.resourceId, 'admin');
    await checkResourceType(deps, body.resourceId, body.resourceType);
    const context = requestContext(deps, req);
    await write(deps, context, accessStream(body.resourceId), accessDecider, { type: 'Revoke', ...body, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  router.get('/api/access-rights/subject/:id', async (req, res) => {
    const principal = principalOf(req);
    const subjectType = ((req.query.subjectType as string | undefined) ?? 'user') as 'user' | 'group';
    const id = subjectType === 'user' ? (req.params.id as string).toLowerCase() : (req.params.id as string);
    checkSubject(subjectType, id);
    if (subjectType === 'user' && id !== principal.id && !isAdmin(principal)) throw new NotFoundError();
    if (subjectType === 'group' && !isAdmin(principal)) {
      const member = await deps.db.selectFrom('usergroup_members').select('user_id').where('group_id', '=', id).where('user_id', '=', principal.id).executeTakeFirst();
      if (!member && !satisfies(await scopesOn(deps, principal, id), 'read')) throw new NotFoundError();
    }
    const rows = await deps.db
      .selectFrom('access_rights')
      .selectAll()
      .where('subject_type', '=', subjectType)
      .where('subject_id', '=', id)
      .orderBy('resource_type')
      .orderBy('resource_id')
      .execute();
    res.json(rows.map(toRecord));
  });

  /** The caller's own scopes on a resource, so a client shows only what the caller may do. */
  router.get('/api/access-rights/resource/:id/mine', async (req, res) => {
    const id = req.params.id as string;
    const held = await requireAccess(deps, principalOf(req), id, 'read');
    res.json({ resourceId: id, scope: [...held].sort() });
  });

  router.get('/api/access-rights/resource/:id/revisions', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'admin');
    // The resource's own stream and its access stream: every event there that gives or takes rights on it, in global order.
    const streams = await deps.db.selectFrom('audit_streams').select('stream_id').where('resource_id', '=', id).execute();
    const streamIds = [...new Set([accessStream(id), ...streams.map((s) => s.stream_id).filter((s) => s.endsWith(`-${id}`) && !s.startsWith(logStream('')))])];
    const events = async function* () {
      let after = null;
      for (;;) {
        const page = await readMatching(deps.store, { streamIds, types: RIGHTS_EVENTS }, { after, limit: 1000 });
        yield* page;
        if (page.length < 1000) return;
        after = page[page.length - 1]!.position;
      }
    };
    const fold = {
      initial: (): Rights => ({}),
      evolve: (rights: Rights, event: RecordedEvent) => evolveRights(id, rights, event),
      view: (rights: Rights) => Object.fromEntries(Object.entries(rights).map(([key, r]) => [key, { scope: r.scope }])),
    };
    res.json(await revisions(events(), fold));
  });

  router.get('/api/access-rights/resource/:id', async (req, res) => {
    const id = req.params.id as string;
    await requireAccess(deps, principalOf(req), id, 'admin');
    let query = deps.db.selectFrom('access_rights').selectAll().where('resource_id', '=', id);
    const resourceType = req.query.resourceType as string | undefined;
    if (resourceType) query = query.where('resource_type', '=', resourceType);
    const rows = await query.orderBy('subject_type').orderBy('subject_id').execute();
    res.json(rows.map(toRecord));
  });

  return router;
}
