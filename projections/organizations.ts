import { sql, type Transaction } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import { MAX_DEPTH, type OrganizationEvent } from '../domain/organizations/organization.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';

export interface OrganizationsTable {
  id: string;
  name: string;
  description: string | null;
  parent_id: string | null;
  created_by: string;
  revision: number;
  created_at: Date;
  updated_at: Date;
}

/** The closure of the parent links: every unit with each of its ancestors, itself at depth 0. */
export interface OrganizationTreeTable {
  unit_id: string;
  unit_name: string;
  ancestor_id: string;
  ancestor_name: string;
  depth: number;
}

export interface OrganizationsTables {
  organizations: OrganizationsTable;
  organization_tree: OrganizationTreeTable;
}

/**
 * Organization units and their tree. Unit rows are guarded by stream
 * revision; the closure is recomputed from the parent links for the subtree an
 * event touches, so it is a function of the rows whatever was applied before,
 * and applying an event again ends in the same rows.
 */
export const organizationsProjection: Projection = {
  name: 'organizations',
  tables: ['organizations', 'organization_tree'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & OrganizationEvent)[]) {
      switch (e.type) {
        case 'OrganizationCreated': {
          const at = new Date(e.data.at);
          const inserted = await tx
            .insertInto('organizations')
            .values({ id: e.data.id, name: e.data.name, description: e.data.description ?? null, parent_id: e.data.parent?.id ?? null, created_by: e.data.createdBy, revision: e.revision, created_at: at, updated_at: at })
            .onConflict((oc) => oc.column('id').doNothing())
            .executeTakeFirst();
          if (Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0) await recomputeSubtree(tx, e.data.id);
          break;
        }
        case 'OrganizationUpdated': {
          const updated = await tx
            .updateTable('organizations')
            .set({ description: e.data.description ?? null, parent_id: e.data.parent?.id ?? null, revision: e.revision, updated_at: new Date(e.data.at) })
            .where('id', '=', e.data.id)
            .where('revision', '<', e.revision)
            .executeTakeFirst();
          if (Number(updated.numUpdatedRows) > 0 && e.data.moved) await recomputeSubtree(tx, e.data.id);
          break;
        }
        case 'OrganizationDeleted':
          await tx.deleteFrom('organizations').where('id', '=', e.data.id).execute();
          await tx.deleteFrom('organization_tree').where((w) => w.or([w('unit_id', '=', e.data.id), w('ancestor_id', '=', e.data.id)])).execute();
          break;
      }
    }
  },
};

/**
 * Rewrites the closure rows of `id` and every unit below it from the parent
 * links. The walk stops after `MAX_DEPTH` levels, so even links that formed a
 * cycle (which the API refuses) could not make it run away.
 */
async function recomputeSubtree(tx: Transaction<Database>, id: string): Promise<void> {
  await sql`WITH RECURSIVE sub(id, level) AS (
      SELECT id, 0 FROM organizations WHERE id = ${id}
      UNION ALL
      SELECT o.id, sub.level + 1 FROM organizations o JOIN sub ON o.parent_id = sub.id WHERE sub.level < ${MAX_DEPTH}
    )
    DELETE FROM organization_tree WHERE unit_id IN (SELECT id FROM sub)`.execute(tx);
  await sql`WITH RECURSIVE sub(id, level) AS (
      SELECT id, 0 FROM organizations WHERE id = ${id}
      UNION ALL
      SELECT o.id, sub.level + 1 FROM organizations o JOIN sub ON o.parent_id = sub.id WHERE sub.level < ${MAX_DEPTH}
    ),
    up(unit_id, ancestor_id, depth) AS (
      SELECT DISTINCT id, id, 0 FROM sub
      UNION ALL
      SELECT up.unit_id, o.parent_id, up.depth + 1 FROM up JOIN organizations o ON o.id = up.ancestor_id
      WHERE o.parent_id IS NOT NULL AND up.depth < ${MAX_DEPTH}
    )
    INSERT INTO organization_tree (unit_id, unit_name, ancestor_id, ancestor_name, depth)
    SELECT up.unit_id, u.name, up.ancestor_id, a.name, min(up.depth)
      FROM up JOIN organizations u ON u.id = up.unit_id JOIN organizations a ON a.id = up.ancestor_id
      GROUP BY up.unit_id, u.name, up.ancestor_id, a.name
    ON CONFLICT (unit_id, ancestor_id) DO UPDATE SET depth = EXCLUDED.depth`.execute(tx);
}
