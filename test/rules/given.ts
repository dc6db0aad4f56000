import * as assert from 'uvu/assert';
import { sql, type Kysely } from 'kysely';
import type { TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';

export type Node = { id: string; type: 'trigger' | 'condition' | 'action'; config: Record<string, unknown> };
export const edge = (from: string, to: string) => ({ from, to });

export const button = (id = 'press'): Node => ({ id, type: 'trigger', config: { resourceType: 'button' } });
export const onDevice = (id: string, deviceId: string, fields?: string[]): Node => ({ id, type: 'trigger', config: { resourceType: 'device', deviceId, ...(fields ? { fields } : {}) } });
export const when = (id: string, deviceId: string, field: string, operator: string, value?: unknown): Node => ({ id, type: 'condition', config: { deviceId, field, operator, ...(value !== undefined ? { value } : {}) } });
export const setField = (id: string, iotnodeId: string, field: string, value: unknown): Node => ({ id, type: 'action', config: { action: 'setField', iotnodeId, field, value } });
export const logAction = (id: string, message: string, extra: Record<string, unknown> = {}): Node => ({ id, type: 'action', config: { action: 'log', message, ...extra } });

/** A rule; fails the test on anything but 201. */
export async function givenRule(t: TestPlatform, name: string, nodes: Node[], edges: { from: string; to: string }[], token?: string): Promise<Record<string, any>> {
  const res = await t.call('POST', '/api/rules-v2', { body: { name, definition: { nodes, edges } }, ...(token ? { token } : {}) });
  assert.is(res.status, 201, res.text);
  return res.body;
}

export async function givenDevice(t: TestPlatform, name: string, fields: Record<string, unknown> = {}, token?: string): Promise<Record<string, any>> {
  const res = await t.call('POST', '/api/iotnodes', { body: { name, ...fields }, ...(token ? { token } : {}) });
  assert.is(res.status, 201, res.text);
  return res.body;
}

export interface RuleLog {
  message: string;
  type: string;
  priority: string;
  category: string;
  resourceType: string;
  data?: Record<string, any>;
}

/** The rule's log, oldest first. */
export async function ruleLog(t: TestPlatform, ruleId: string, token?: string): Promise<RuleLog[]> {
  const res = await t.call('GET', `/api/logs?resourceId=${ruleId}&limit=1000`, token ? { token } : {});
  assert.is(res.status, 200, res.text);
  return (res.body.logs as RuleLog[]).reverse();
}

/** Waits until the rule's log has an entry matching `pattern`. */
export const logged = (t: TestPlatform, ruleId: string, pattern: RegExp, ms = 10_000, token?: string) =>
  eventually(async () => (await ruleLog(t, ruleId, token)).find((l) => pattern.test(l.message)), ms, `a log entry of rule ${ruleId} matching ${pattern}`);

export const deviceNow = async (t: TestPlatform, id: string) => (await t.call('GET', `/api/iotnodes/${id}`)).body as Record<string, any>;

/** Sets the checkpoint `name` just before the last event of `type` on `streamId`: the state of a subscriber that had not handled it yet. */
export async function checkpointBefore(db: Kysely<any>, name: string, streamId: string, type: string): Promise<void> {
  await sql`UPDATE es.checkpoints c SET commit_position = p.tx, prepare_position = p.gp
    FROM (SELECT transaction_id::text::numeric AS tx, global_position AS gp FROM es.events
          WHERE (transaction_id, global_position) < (SELECT transaction_id, global_position FROM es.events WHERE stream_id = ${streamId} AND type = ${type} ORDER BY global_position DESC LIMIT 1)
          ORDER BY transaction_id DESC, global_position DESC LIMIT 1) p
    WHERE c.name = ${name}`.execute(db);
}
