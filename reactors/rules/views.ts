import { sql, type Kysely } from 'kysely';
import type { Database } from '../../projections/database.js';
import type { Principal } from '../../domain/access/principal.js';
import { readableBy } from '../../projections/access.js';
import type { DeviceDoc } from '../../domain/devices/device.js';
import type { DeviceView } from '../../domain/rules/run.js';

export const NO_OWNER = "the rule's owner no longer exists or is disabled";

/**
 * Devices as a rule's owner sees them, from the devices read model, in one
 * query: the document, or why the run cannot use it (gone, or not readable
 * by the owner). `known` holds documents the caller already has (a device
 * as the triggering event left it), which still need the owner's right.
 */
export async function deviceViews(db: Kysely<Database>, owner: Principal | null, ids: readonly string[], known: Map<string, DeviceDoc> = new Map()): Promise<Map<string, DeviceView>> {
  const views = new Map<string, DeviceView>();
  const wanted = [...new Set(ids)];
  if (wanted.length === 0) return views;
  if (!owner) {
    for (const id of wanted) views.set(id, { doc: null, why: NO_OWNER });
    return views;
  }
  const { rows } = await sql<{ id: string; doc: DeviceDoc; readable: boolean }>`
    SELECT d.id, d.doc, ${readableBy(owner, 'd.id')} AS readable FROM devices d WHERE d.id = ANY(${wanted}::text[])`.execute(db);
  const found = new Map(rows.map((r) => [r.id, r]));
  for (const id of wanted) {
    const row = found.get(id);
    if (!row) views.set(id, { doc: null, why: `iotnode ${id} does not exist` });
    else if (!row.readable) views.set(id, { doc: null, why: `the rule's owner cannot read iotnode ${id}` });
    else views.set(id, { doc: known.get(id) ?? row.doc });
  }
  return views;
}
