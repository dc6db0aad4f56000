import type { ActiveDashboard, Widget } from '../../domain/dashboards/dashboard.js';
import type { TemplateRules } from './rules.js';

/** A widget as GET shows it; `_broken` and `error` only on a widget that fails today's rules. */
export interface WidgetView {
  _id: string;
  x: number;
  y: number;
  width: number;
  height: number;
  template: string;
  settings: Record<string, unknown>;
  _broken?: true;
  error?: string;
}

export interface WidgetPlaceView {
  _id: string;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface DashboardView<W> {
  _id: string;
  name: string;
  title?: string;
  description?: string;
  headerSettings?: Record<string, unknown>;
  widgets: W[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const place = (w: Widget): WidgetPlaceView => ({ _id: w.id, x: w.x, y: w.y, width: w.width, height: w.height });

/**
 * Each stored widget checked against today's rules of its template. A failing
 * one is marked and keeps its settings as stored; one whose content is
 * missing is reported as an unknown widget. Neither fails the dashboard.
 */
export function widgetView(w: Widget, rules: TemplateRules): WidgetView {
  if (typeof w.template !== 'string' || !isObject(w.settings)) {
    return { ...place(w), template: 'unknown', settings: isObject(w.settings) ? w.settings : {}, _broken: true, error: 'Widget not found' };
  }
  const problem = rules.problem(w.template, w.settings);
  const view: WidgetView = { ...place(w), template: w.template, settings: w.settings };
  if (problem) {
    view._broken = true;
    view.error = problem;
  }
  return view;
}

function header<W>(d: ActiveDashboard, widgets: W[]): DashboardView<W> {
  const view = { _id: d.id, name: d.header.name } as DashboardView<W>;
  if (d.header.title !== undefined) view.title = d.header.title;
  if (d.header.description !== undefined) view.description = d.header.description;
  if (d.header.headerSettings !== undefined) view.headerSettings = d.header.headerSettings as Record<string, unknown>;
  view.widgets = widgets;
  return view;
}

/** The GET shape: every widget with its place and content. */
export const fullView = (d: ActiveDashboard, rules: TemplateRules): DashboardView<WidgetView> => header(d, d.widgets.map((w) => widgetView(w, rules)));

/** The POST and PATCH shape: widgets with their place only. */
export const placesView = (d: ActiveDashboard): DashboardView<WidgetPlaceView> => header(d, d.widgets.map(place));

/** The dashboard as stored, for its revisions: every widget's place, template and settings, without today's rule checks. */
export const storedView = (d: ActiveDashboard): DashboardView<Omit<Widget, 'id'> & { _id: string }> => header(d, d.widgets.map(({ id, ...w }) => ({ _id: id, ...w })));
