import { Router } from 'express';
import { sql, type Expression, type SqlBool } from 'kysely';
import type { Deps } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy } from '../access.js';
import { ValidationError } from '../../domain/shared/errors.js';

interface Cursor {
  time: string;
  id: string;
}

const encode = (c: Cursor) => Buffer.from(JSON.stringify(c)).toString('base64url');
function decode(text: string): Cursor {
  try {
    const c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Cursor;
    if (typeof c.time === 'string' && typeof c.id === 'string' && !isNaN(Date.parse(c.time))) return c;
  } catch {
    // reported below
  }
  throw ValidationError.field('cursor', 'is not a cursor this API returned');
}

/** `GET /api/logs`: newest first, only entries on resources the caller can read, paged by an opaque cursor. */
export function logRoutes(deps: Deps): Router {
  const router = Router();

  router.get('/api/logs', async (req, res) => {
    const q = req.query as Record<string, string | undefined>;
    const where: Expression<SqlBool>[] = [readableBy(principalOf(req), 'l.resource_id'), sql<SqlBool>`(l.expires_at IS NULL OR l.expires_at > now())`];
    if (q.resourceId) where.push(sql<SqlBool>`l.resource_id = ${q.resourceId}`);
    if (q.resourceType) where.push(sql<SqlBool>`l.resource_type = ${q.resourceType}`);
    for (const key of ['type', 'priority', 'category'] as const) if (q[key]) where.push(sql<SqlBool>`l.${sql.ref(key)} = ${q[key]!.toLowerCase()}`);
    if (q.message) where.push(sql<SqlBool>`l.message ILIKE ${`%${q.message.replace(/[\\%_]/g, (c) => `\\${c}`)}%`}`);
    if (q.from) where.push(sql<SqlBool>`l.time >= ${new Date(q.from)}`);
    if (q.to) where.push(sql<SqlBool>`l.time < ${new Date(q.to)}`);
    if (q.cursor) {
      const c = decode(q.cursor);
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
      nextCursor: rows.length > limit && last ? encode({ time: last.time.toISOString(), id: last.id }) : null,
    });
  });

  return router;
}
