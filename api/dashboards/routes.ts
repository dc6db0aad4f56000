import { Router, type Request, type Response } from 'express';
import { sql } from 'kysely';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { principalOf } from '../http.js';
import { readableBy, requireAccess } from '../access.js';
import type { TemplateRules } from './rules.js';
import { fullView, placesView, storedView, widgetView } from './view.js';
import { resourceAt, resourceRevisions, timeOf } from '../history.js';
import {
  HEADER_FIELDS,
  checkPlace,
  dashboardDecider,
  dashboardStream,
  type ActiveDashboard,
  type DashboardCommand,
  type DashboardEvent,
  type DashboardState,
  type Header,
  type Widget,
} from '../../domain/dashboards/dashboard.js';
import { placeOf, type Place, type Template } from '../../domain/dashboards/templates.js';
import { newResourceId } from '../../domain/shared/ids.js';
import { RecentMemory } from '../../domain/shared/recentMemory.js';
import { ConcurrencyError, ForbiddenError, NotFoundError, PreconditionFailedError } from '../../domain/shared/errors.js';
import type { CommandContext, Handled } from '../../domain/shared/decider.js';
import { stateOfRow, type DashboardsTable } from '../../projections/dashboards.js';

/** Request bodies, as the OpenAPI document has already checked them. */
interface WidgetCreateBody extends Partial<Place> {
  template: Template;
  settings?: unknown;
}
interface DashboardCreateBody extends Header {
  widgets?: WidgetCreateBody[];
}
interface DashboardPatchBody extends Partial<Header> {
  widgets?: ({ _id: string } & Place)[];
}
interface WidgetAddBody {
  template: Template;
  settings?: unknown;
  width?: number;
  height?: number;
}
interface WidgetReplaceBody {
  template: Template;
  settings: unknown;
}

/**
 * How a change meets a concurrent one on the same dashboard:
 * - `commute`: the result does not depend on the other change (add a widget, delete one, edit the header): retried.
 * - `exclusive`: computed from what the caller saw (a whole layout): a concurrent change is a 409.
 * - `widget`: commutes unless the widget itself went away meanwhile, which is a 409.
 * With `If-Match`, any change since that revision is a 412.
 */
type Mode = 'commute' | 'exclusive' | 'widget';

/** Enough for every request in a burst on one dashboard to get its turn. */
const RETRIES = 50;

/** `If-Match: "12"` (or `W/"12"`, or `12`) → 12; `*` or absent → no precondition; anything else matches no revision. */
function ifMatch(req: Request): number | undefined {
  const header = req.headers['if-match'];
  if (header === undefined || header.trim() === '*') return undefined;
  const match = /^\s*(?:W\/)?"?(\d{1,15})"?\s*$/.exec(header);
  if (!match) throw new PreconditionFailedError(`If-Match ${header} is not a revision of this dashboard`);
  return Number(match[1]);
}

const pickHeader = (body: Partial<Header>): Partial<Header> => {
  const header: Partial<Header> = {};
  for (const field of HEADER_FIELDS) if (body[field] !== undefined) (header as Record<string, unknown>)[field] = body[field];
  return header;
};

/**
 * GET bodies of recently read dashboards, by id. A body depends only on the
 * stored revision and on the template rules, which are fixed for the life of
 * the process, so it stays right until the revision moves.
 */
class RenderedDashboards {
  private readonly entries: RecentMemory<string, { revision: number; body: string }>;
  constructor(capacity: number) {
    this.entries = new RecentMemory(capacity);
  }

  get(id: string): { revision: number; body: string } | undefined {
    return this.entries.get(id);
  }

  set(id: string, revision: number, body: string): void {
    this.entries.set(id, { revision, body });
  }
}

export function dashboardRoutes(deps: Deps, rules: TemplateRules): Router {
  const router = Router();
  const rendered = new RenderedDashboards(500);

  async function change(req: Request, context: CommandContext, dashboardId: string, command: DashboardCommand, mode: Mode): Promise<Handled<DashboardState, DashboardEvent>> {
    const stream = dashboardStream(dashboardId);
    const expectedRevision = ifMatch(req);
    if (expectedRevision !== undefined) {
      try {
        return await write(deps, context, stream, dashboardDecider, command, { expectedRevision });
      } catch (error) {
        if (error instanceof ConcurrencyError) throw new PreconditionFailedError(`The dashboard is no longer at revision ${expectedRevision}; read it again`);
        throw error;
      }
    }
    if (mode === 'commute') return write(deps, context, stream, dashboardDecider, command, { retries: RETRIES });
    if (mode === 'exclusive') return write(deps, context, stream, dashboardDecider, command);
    try {
      return await write(deps, context, stream, dashboardDecider, command);
    } catch (error) {
      if (!(error instanceof ConcurrencyError)) throw error;
      return write(deps, context, stream, dashboardDecider, { ...command, raced: true } as DashboardCommand, { retries: RETRIES });
    }
  }

  const active = (handled: Handled<DashboardState, DashboardEvent>): ActiveDashboard => {
    if (handled.state.status !== 'active') throw new NotFoundError('Dashboard not found');
    return handled.state;
  };

  const withETag = (res: Response, handled: Handled<DashboardState, DashboardEvent>) => {
    if (handled.result) res.setHeader('ETag', `"${handled.result.nextRevision}"`);
    return res;
  };

  async function loadRow(id: string) {
    const row = await deps.db.selectFrom('dashboards').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError('Dashboard not found');
    return row;
  }

  /** A new widget, its place checked before its settings; `path` is where it sits in the request (`widgets.3`, or empty). */
  const newWidget = (body: WidgetCreateBody, path: string): Widget => {
    const place = placeOf(body.template, { x: body.x, y: body.y, width: body.width, height: body.height });
    checkPlace(place, path);
    const settings = rules.forWrite(body.template, body.settings ?? {}, path ? `${path}.settings` : 'settings');
    return { id: newResourceId(), ...place, template: body.template, settings };
  };

  router.get('/api/dashboards', async (req, res) => {
    const rows = await deps.db
      .selectFrom('dashboards')
      .selectAll()
      .where(readableBy(principalOf(req), 'dashboards.id'))
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    res.json(rows.map((row) => fullView(stateOfRow(row), rules)));
  });

  router.post('/api/dashboards', async (req, res) => {
    const principal = principalOf(req);
    const body = req.body as DashboardCreateBody;
    // Every widget is checked, in order and each place before its settings, before anything is written:
    // the 422 names the first failing field, and an import is all or nothing.
    const widgets = (body.widgets ?? []).map((w, i) => newWidget(w, `widgets.${i}`));
    const id = newResourceId();
    const context = requestContext(deps, req);
    const header = { ...pickHeader(body), name: body.name };
    const handled = await write(deps, context, dashboardStream(id), dashboardDecider, {
      type: 'CreateDashboard',
      id,
      createdBy: principal.id,
      header,
      widgets,
      at: context.now,
    });
    withETag(res, handled).status(201).json(placesView(active(handled)));
  });

  router.get('/api/dashboards/:dashboardId', async (req, res) => {
    const id = req.params.dashboardId!;
    const at = timeOf(req);
    if (at !== undefined) {
      // Time travel: the dashboard folded from its events up to `at`, shown as the live read shows it; rights as they are now.
      await requireAccess(deps, principalOf(req), id, 'read', 'Dashboard not found');
      const { state } = await resourceAt(deps, dashboardStream(id), dashboardDecider, at);
      if (state.status !== 'active') throw new NotFoundError('Dashboard not found');
      res.json(fullView(state, rules));
      return;
    }
    const known = rendered.get(id);
    // One query: the object check (a dashboard the caller cannot read is as missing as one that does not
    // exist) and the row, whose widgets are only fetched when the revision is not the one already rendered.
    const row = await deps.db
      .selectFrom('dashboards')
      .select(['id', 'name', 'title', 'description', 'header_settings', 'created_by', 'revision', 'created_at', 'updated_at'])
      .select(sql<DashboardsTable['widgets'] | null>`CASE WHEN revision = ${known?.revision ?? -1} THEN NULL ELSE widgets END`.as('widgets'))
      .where('id', '=', id)
      .where(readableBy(principalOf(req), 'dashboards.id'))
      .executeTakeFirst();
    if (!row) throw new NotFoundError('Dashboard not found');
    let body = known?.body;
    if (row.widgets !== null || body === undefined) {
      body = JSON.stringify(fullView(stateOfRow({ ...row, widgets: row.widgets ?? [] }), rules));
      rendered.set(id, row.revision, body);
    }
    res.setHeader('ETag', `"${row.revision}"`);
    res.type('application/json').send(body);
  });

  router.get('/api/dashboards/:dashboardId/revisions', async (req, res) => {
    const id = req.params.dashboardId!;
    await requireAccess(deps, principalOf(req), id, 'read', 'Dashboard not found');
    res.json(await resourceRevisions(deps, dashboardStream(id), dashboardDecider, (s) => (s.status === 'active' ? storedView(s) : undefined)));
  });

  router.patch('/api/dashboards/:dashboardId', async (req, res) => {
    const id = req.params.dashboardId!;
    await requireAccess(deps, principalOf(req), id, 'write', 'Dashboard not found');
    const body = req.body as DashboardPatchBody;
    const layout = body.widgets?.map((w) => ({ id: w._id, x: w.x, y: w.y, width: w.width, height: w.height }));
    const context = requestContext(deps, req);
    const command: DashboardCommand = { type: 'ChangeDashboard', header: pickHeader(body), at: context.now };
    if (layout) command.layout = layout;
    const handled = await change(req, context, id, command, layout ? 'exclusive' : 'commute');
    withETag(res, handled).json(placesView(active(handled)));
  });

  router.delete('/api/dashboards/:dashboardId', async (req, res) => {
    const id = req.params.dashboardId!;
    await requireAccess(deps, principalOf(req), id, 'write', 'Dashboard not found');
    const context = requestContext(deps, req);
    await change(req, context, id, { type: 'DeleteDashboard', at: context.now }, 'commute');
    res.status(204).end();
  });

  router.post('/api/dashboards/:dashboardId/duplicate', async (req, res) => {
    const sourceId = req.params.dashboardId!;
    const principal = principalOf(req);
    await requireAccess(deps, principal, sourceId, 'write', 'Dashboard not found');
    // The source as its own stream has it, not as a read model last saw it.
    let source: DashboardState = dashboardDecider.initialState();
    for (const e of await deps.store.readStream(dashboardStream(sourceId))) source = dashboardDecider.evolve(source, e as unknown as DashboardEvent);
    if (source.status !== 'active') throw new NotFoundError('Dashboard not found');
    const id = newResourceId();
    const context = requestContext(deps, req);
    const handled = await write(deps, context, dashboardStream(id), dashboardDecider, {
      type: 'DuplicateDashboard',
      id,
      createdBy: principal.id,
      source,
      widgetIds: source.widgets.map(() => newResourceId()),
      at: context.now,
    });
    withETag(res, handled).status(201).json(placesView(active(handled)));
  });

  router.post('/api/dashboards/:dashboardId/widgets', async (req, res) => {
    const id = req.params.dashboardId!;
    await requireAccess(deps, principalOf(req), id, 'write', 'Dashboard not found');
    const body = req.body as WidgetAddBody;
    // Added widgets land at x 0, y 99 whatever the body says; PATCH moves them.
    const widget = newWidget({ template: body.template, settings: body.settings, width: body.width, height: body.height }, '');
    const context = requestContext(deps, req);
    const handled = await change(req, context, id, { type: 'AddWidget', widget, at: context.now }, 'commute');
    withETag(res, handled).status(201).json({ _id: widget.id, template: widget.template, settings: widget.settings });
  });

  router.put('/api/dashboards/:dashboardId/widgets/:widgetId', async (req, res) => {
    const { dashboardId, widgetId } = req.params as { dashboardId: string; widgetId: string };
    await requireAccess(deps, principalOf(req), dashboardId, 'write', 'Dashboard not found');
    const body = req.body as WidgetReplaceBody;
    // A template change is refused before the settings are judged against a template the widget does not have.
    const row = await loadRow(dashboardId);
    const stored = row.widgets.find((w) => w.id === widgetId);
    if (!stored) throw new NotFoundError('Widget not found');
    if (stored.template !== undefined && stored.template !== body.template) throw new ForbiddenError('Cannot change widget template');
    const settings = rules.forWrite(body.template, body.settings, 'settings');
    const context = requestContext(deps, req);
    const command: DashboardCommand = { type: 'ReplaceWidgetSettings', widgetId, template: body.template, settings, at: context.now };
    const handled = await change(req, context, dashboardId, command, 'widget');
    withETag(res, handled).status(201).end();
  });

  router.delete('/api/dashboards/:dashboardId/widgets/:widgetId', async (req, res) => {
    const { dashboardId, widgetId } = req.params as { dashboardId: string; widgetId: string };
    await requireAccess(deps, principalOf(req), dashboardId, 'write', 'Dashboard not found');
    const context = requestContext(deps, req);
    await change(req, context, dashboardId, { type: 'DeleteWidget', widgetId, at: context.now }, 'commute');
    res.status(204).end();
  });

  router.post('/api/dashboards/:dashboardId/widgets/:widgetId/duplicate', async (req, res) => {
    const { dashboardId, widgetId } = req.params as { dashboardId: string; widgetId: string };
    await requireAccess(deps, principalOf(req), dashboardId, 'write', 'Dashboard not found');
    const newId = newResourceId();
    const context = requestContext(deps, req);
    const handled = await change(req, context, dashboardId, { type: 'DuplicateWidget', widgetId, newId, at: context.now }, 'widget');
    const copy = active(handled).widgets.find((w) => w.id === newId)!;
    withETag(res, handled).status(201).json(widgetView(copy, rules));
  });

  return router;
}
