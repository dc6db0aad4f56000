import type { Transaction } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import {
  DASHBOARD_EVENTS,
  dashboardDecider,
  type ActiveDashboard,
  type DashboardEvent,
  type DashboardState,
  type HeaderSettings,
  type Widget,
} from '../domain/dashboards/dashboard.js';
import type { Database } from './database.js';
import type { Projection } from './runner.js';

export interface DashboardsTable {
  id: string;
  name: string;
  title: string | null;
  description: string | null;
  header_settings: HeaderSettings | null;
  /** Place and content of every widget, in the order they were added. */
  widgets: Widget[];
  created_by: string;
  /** The stream revision applied last: the dashboard's `ETag`, and the guard against applying an event twice. */
  revision: number;
  created_at: Date;
  updated_at: Date;
}

export interface DashboardsTables {
  dashboards: DashboardsTable;
}

const STREAM_PREFIX = 'dashboard-';

/** The row as the state the decider folds, so the read model and the write side agree on every field. */
export function stateOfRow(row: DashboardsTable): ActiveDashboard {
  const header: ActiveDashboard['header'] = { name: row.name };
  if (row.title !== null) header.title = row.title;
  if (row.description !== null) header.description = row.description;
  if (row.header_settings !== null) header.headerSettings = row.header_settings;
  return { status: 'active', id: row.id, createdBy: row.created_by, createdAt: row.created_at.toISOString(), header, widgets: row.widgets };
}

/**
 * One row per dashboard, folded with the decider's own `evolve`. A batch's
 * events are grouped per dashboard, so an import or a burst of edits costs
 * one read and one write of the row.
 */
export const dashboardsProjection: Projection = {
  name: 'dashboards',
  tables: ['dashboards'],
  async apply(tx, batch) {
    const streams = new Map<string, RecordedEvent[]>();
    for (const event of batch) {
      if (!DASHBOARD_EVENTS.has(event.type) || !event.streamId.startsWith(STREAM_PREFIX)) continue;
      const list = streams.get(event.streamId);
      if (list) list.push(event);
      else streams.set(event.streamId, [event]);
    }
    for (const [streamId, events] of streams) await applyStream(tx, streamId.slice(STREAM_PREFIX.length), events);
  },
};

async function applyStream(tx: Transaction<Database>, id: string, events: RecordedEvent[]): Promise<void> {
  const row = await tx.selectFrom('dashboards').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
  let state: DashboardState = row ? stateOfRow(row) : { status: 'none' };
  let revision = row ? row.revision : -1;
  let updatedAt: string | null = null;
  for (const event of events) {
    if (event.revision <= revision) continue;
    state = dashboardDecider.evolve(state, event as unknown as DashboardEvent);
    revision = event.revision;
    updatedAt = event.metadata.time;
  }
  if (updatedAt === null) return;
  if (state.status !== 'active') {
    if (row) await tx.deleteFrom('dashboards').where('id', '=', id).execute();
    return;
  }
  const values = {
    name: state.header.name,
    title: state.header.title ?? null,
    description: state.header.description ?? null,
    header_settings: (state.header.headerSettings === undefined ? null : JSON.stringify(state.header.headerSettings)) as unknown as HeaderSettings,
    widgets: JSON.stringify(state.widgets) as unknown as Widget[],
    revision,
    updated_at: new Date(updatedAt),
  };
  if (row) {
    await tx.updateTable('dashboards').set(values).where('id', '=', id).execute();
  } else {
    await tx
      .insertInto('dashboards')
      .values({ id, created_by: state.createdBy, created_at: new Date(state.createdAt), ...values })
      .execute();
  }
}
