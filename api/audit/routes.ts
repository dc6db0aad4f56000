import { Router, type Request, type Response } from 'express';
import type { Deps } from '../deps.js';
import { principalOf } from '../http.js';
import { requireAccess } from '../access.js';
import { isAdmin } from '../../domain/access/principal.js';
import { cursors } from '../cursor.js';
import { readMatching } from '../../domain/eventstore/filter.js';
import type { EventFilter } from '../../domain/eventstore/port.js';
import type { Position, RecordedEvent } from '../../domain/shared/events.js';
import { ForbiddenError, NotFoundError } from '../../domain/shared/errors.js';
import { auditView } from './view.js';

interface Query {
  streamId?: string;
  resourceType?: string;
  resourceId?: string;
  actor?: string;
  correlationId?: string;
  type?: string | string[];
  from?: string;
  to?: string;
  limit?: number;
  cursor?: string;
}

interface Cursor {
  c: string;
  p: string;
}

const isCursor = (v: unknown): v is Cursor =>
  typeof v === 'object' && v !== null && /^\d{1,20}$/.test(String((v as Cursor).c)) && /^\d{1,20}$/.test(String((v as Cursor).p));

/** Events per read while exporting: large enough to stream at full speed, small enough to hold. */
const EXPORT_PAGE = 2000;

export const TOO_BROAD = 'ERR - resourceId or streamId is required: only an admin reads the audit log across resources; name one resource you hold admin scope on';

/** `type=A&type=B`, `type=A,B` or both → the distinct types. */
function typesOf(value: string | string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  const items = (Array.isArray(value) ? value : [value]).flatMap((v) => String(v).split(',')).map((v) => v.trim()).filter(Boolean);
  return items.length ? [...new Set(items)] : undefined;
}

/**
 * `GET /api/audit/events`: the event log as it was written, in global order,
 * filtered, paged by a signed cursor or streamed whole as NDJSON.
 *
 * Visibility: an admin (the built-in role) reads every event. Anyone else
 * reads the events of one resource at a time, on which they hold `admin`
 * scope, named by `resourceId` or by a `streamId` of it; a query that names
 * no resource is too broad (403), a resource they cannot read is 404 and
 * one they read without `admin` 403. Data is redacted (`domain/audit/redact.ts`).
 */
export function auditRoutes(deps: Deps): Router {
  const router = Router();
  const pages = cursors(deps.jwtSecret, 'audit');

  /** The query as a store filter, with the caller's visibility applied. */
  async function filterOf(req: Request): Promise<EventFilter> {
    const q = req.query as Query;
    const principal = principalOf(req);
    if (!isAdmin(principal)) {
      let resourceId = q.resourceId;
      if (resourceId === undefined && q.streamId !== undefined) {
        const row = await deps.db.selectFrom('audit_streams').select('resource_id').where('stream_id', '=', q.streamId).executeTakeFirst();
        if (!row) throw new NotFoundError();
        resourceId = row.resource_id;
      }
      if (resourceId === undefined) throw new ForbiddenError(TOO_BROAD);
      await requireAccess(deps, principal, resourceId, 'admin');
    }
    const filter: EventFilter = {};
    if (q.resourceId !== undefined || q.resourceType !== undefined) {
      let streams = deps.db.selectFrom('audit_streams').select('stream_id');
      if (q.resourceId !== undefined) streams = streams.where('resource_id', '=', q.resourceId);
      if (q.resourceType !== undefined) streams = streams.where('resource_type', '=', q.resourceType);
      filter.streamIds = (await streams.execute()).map((r) => r.stream_id);
    }
    if (q.streamId !== undefined) filter.streamIds = filter.streamIds ? filter.streamIds.filter((s) => s === q.streamId) : [q.streamId];
    const types = typesOf(q.type);
    if (types) filter.types = types;
    if (q.actor !== undefined) filter.actor = q.actor;
    if (q.correlationId !== undefined) filter.correlationId = q.correlationId;
    // Event times are UTC ISO 8601 text; the bounds are brought to the same form.
    if (q.from !== undefined) filter.from = new Date(q.from).toISOString();
    if (q.to !== undefined) filter.to = new Date(q.to).toISOString();
    return filter;
  }

  const afterOf = (req: Request): Position | null => {
    const text = (req.query as Query).cursor;
    if (text === undefined) return null;
    const c = pages.open(text, isCursor);
    return { commit: BigInt(c.c), prepare: BigInt(c.p) };
  };

  /** Until the client has taken what was written, or has gone; the listeners go with it, however many pages wait. */
  const drained = (res: Response) =>
    new Promise<void>((resolve) => {
      const done = () => {
        res.off('drain', done);
        res.off('close', done);
        resolve();
      };
      res.on('drain', done);
      res.on('close', done);
    });

  /** Every matching event, one JSON object a line, read a page at a time and written as the client takes it. */
  async function exportNdjson(req: Request, res: Response, filter: EventFilter, after: Position | null): Promise<void> {
    res.status(200).type('application/x-ndjson');
    res.setHeader('Cache-Control', 'no-store');
    let gone = false;
    res.on('close', () => (gone = true));
    const read = (from: Position | null) => readMatching(deps.store, filter, { after: from, limit: EXPORT_PAGE });
    try {
      // The next page is read while this one is written: the database and the serialising overlap, and at most two pages are held.
      let next: Promise<RecordedEvent[]> | null = read(after);
      while (next) {
        const events: RecordedEvent[] = await next;
        next = events.length === EXPORT_PAGE && !gone ? read(events[events.length - 1]!.position) : null;
        if (events.length === 0 || gone) break;
        let chunk = '';
        for (const e of events) chunk += JSON.stringify(auditView(e)) + '\n';
        if (!res.write(chunk)) await drained(res);
      }
      // A read already under way when the client left is let finish and dropped.
      next?.catch(() => {});
      res.end();
    } catch (err) {
      // The status line is sent: the only way left to say the export is incomplete is to cut it.
      req.log.error({ err }, 'audit export failed midway');
      res.destroy(err as Error);
    }
  }

  router.get('/api/audit/events', async (req, res) => {
    const filter = await filterOf(req);
    const after = afterOf(req);
    if (req.accepts(['application/json', 'application/x-ndjson']) === 'application/x-ndjson') {
      await exportNdjson(req, res, filter, after);
      return;
    }
    const limit = Number((req.query as Query).limit ?? 100);
    const events = await readMatching(deps.store, filter, { after, limit: limit + 1 });
    const page = events.slice(0, limit);
    const last = page[page.length - 1];
    const body: { events: unknown[]; nextCursor?: string } = { events: page.map(auditView) };
    if (events.length > limit && last) body.nextCursor = pages.seal({ c: String(last.position.commit), p: String(last.position.prepare) });
    res.json(body);
  });

  return router;
}
