import { Router } from 'express';
import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy } from '../access.js';
import { isUuid } from '../../domain/shared/ids.js';
import { cursors } from '../cursor.js';

interface Cursor {
  time: string;
  id: string;
}

const isCursor = (c: unknown): c is Cursor =>
  typeof c === 'object' && c !== null && typeof (c as Cursor).time === 'string' && !isNaN(Date.parse((c as Cursor).time)) && isUuid((c as Cursor).id);

/** The distinct lower-case values of a list parameter, given repeated, comma-separated or both. */
function listOf(value: string | string[] | undefined): string[] {
  const items = value === undefined ? [] : Array.isArray(value) ? value : [value];
  return [...new Set(items.flatMap((v) => String(v).split(',')).map((v) => v.trim().toLowerCase()).filter(Boolean))];
}

/** `GET /api/logs`: newest first, only entries on resources the caller can read, paged by an opaque cursor. */
export function logRoutes(deps: Deps): Router {
  const router = Router();
  const pages = cursors(deps.jwtSecret, 'logs');

  router.get('/api/logs', async (req, res) => {
    const q = req.query as Record<string, string | undefined>;
    const lists = req.query as Record<string, string | string[] | undefined>;
    const where: Expression<SqlBool>[] = [readableBy(principalOf(req), 'l.resource_id'), sql<SqlBool>`(l.expires_at IS NULL OR l.expires_at > now())`];
    if (q.resourceId) where.push(sql<SqlBool>`l.resource_id = ${q.resourceId}`);
    if (q.resourceType) where.push(sql<SqlBool>`l.resource_type = ${q.resourceType}`);
    // `type` and `priority` are lists (repeated or comma-separated); one value is a list of one.
    for (const key of ['type', 'priority'] as const) {
      const values = listOf(lists[key]);
      if (values.length) where.push(sql<SqlBool>`l.${sql.ref(key)} = ANY(${values}::text[])`);
    }
    if (q.category) where.push(sql<SqlBool>`l.category = ${q.category.toLowerCase()}`);
    if (q.message) where.push(sql<SqlBool>`l.message ILIKE ${`%${q.message.replace(/[\\%_]/g, (c) => `\\${c}`)}%`}`);
    if (q.from) where.push(sql<SqlBool>`l.time >= ${new Date(q.from)}`);
    if (q.to) where.push(sql<SqlBool>`l.time < ${new Date(q.to)}`);
    if (q.cursor) {
      const c = pages.open(q.cursor, isCursor);
      where.push(sql<SqlBool>`(l.time, l.id) < (${c.time}::timestamptz, ${c.id}::uuid)`);
    }
    const limit = Number(q.limit ?? 100);
    const { rows } = await sql<{ id: string; resource_id: string; resource_type: string; type: string; priority: string; category: string; message: string; time: Date; expires_at: Date | null; data: unknown }>`
      SELECT l.* FROM device_logs l WHERE ${sql.join(where, sql` AND `)} ORDER BY l.time DESC, l.id DESC LIMIT ${limit + 1}`.execute(deps.db);
    const page = rows.slice(0, limit);
    const last = page[page.length - 1];
    res.json({
      logs: page.map((r) => ({
        _id: r.id,
        resourceId: r.resource_id,
        resourceType: r.resource_type,
        type: r.type,
        priority: r.priority,
        category: r.category,
        message: r.message,
        time: r.time.toISOString(),
        ...(r.expires_at ? { expiresAt: r.expires_at.toISOString() } : {}),
        ...(r.data ? { data: r.data } : {}),
      })),
      nextCursor: rows.length > limit && last ? pages.seal({ time: last.time.toISOString(), id: last.id }) : null,
    });
  });

  return router;
}
