import { sql } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { RuleDefinition, RuleEvent } from '../domain/rules/rule.js';
import type { RunEvent } from '../domain/rules/run.js';
import type { Projection } from './runner.js';

export interface RulesTable {
  id: string;
  name: string;
  definition: RuleDefinition;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  revision: number;
}

export interface RuleSchedulesTable {
  rule_id: string;
  node_id: string;
  last_slot: Date;
}

export interface RulesTables {
  rules_v2: RulesTable;
  rule_schedules: RuleSchedulesTable;
}

/**
 * Rules and their schedules' last decided slots. A rule row moves only
 * forward in its stream's revisions, and a slot only forward in time, so a
 * batch applied again changes nothing. The rules' logs come from the run
 * events through the logs projection.
 */
export const rulesProjection: Projection = {
  name: 'rules',
  tables: ['rule_schedules', 'rules_v2'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & (RuleEvent | RunEvent))[]) {
      switch (e.type) {
        case 'RuleCreated':
        case 'RuleReplaced': {
          const { id, name, definition, at } = e.data;
          const createdBy = e.type === 'RuleCreated' ? e.data.createdBy : '';
          await sql`INSERT INTO rules_v2 (id, name, definition, created_by, created_at, updated_at, revision)
            VALUES (${id}, ${name}, ${JSON.stringify(definition)}::jsonb, ${createdBy}, ${at}, ${at}, ${e.revision})
            ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name, definition = EXCLUDED.definition, updated_at = EXCLUDED.updated_at, revision = EXCLUDED.revision
            WHERE rules_v2.revision < EXCLUDED.revision`.execute(tx);
          break;
        }
        case 'RuleDeleted':
          await sql`DELETE FROM rule_schedules WHERE rule_id = ${e.data.id}`.execute(tx);
          await sql`DELETE FROM rules_v2 WHERE id = ${e.data.id}`.execute(tx);
          break;
        case 'RuleRunStarted':
          if (e.data.trigger.type === 'schedule') await slot(tx, e.data.ruleId, e.data.trigger.nodeId, e.data.trigger.slot);
          break;
        case 'RuleSlotsMissed':
          await slot(tx, e.data.ruleId, e.data.nodeId, e.data.latest);
          break;
        default:
          break;
      }
    }
  },
};

async function slot(tx: Parameters<Projection['apply']>[0], ruleId: string, nodeId: string, at: string): Promise<void> {
  // Only for a rule that still exists: a late slot of a deleted rule leaves nothing behind.
  await sql`INSERT INTO rule_schedules (rule_id, node_id, last_slot)
    SELECT ${ruleId}, ${nodeId}, ${at}::timestamptz WHERE EXISTS (SELECT 1 FROM rules_v2 WHERE id = ${ruleId})
    ON CONFLICT (rule_id, node_id) DO UPDATE SET last_slot = GREATEST(rule_schedules.last_slot, EXCLUDED.last_slot)`.execute(tx);
}
