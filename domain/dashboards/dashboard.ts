import type { Decider } from '../shared/decider.js';
import { ConflictError, ForbiddenError, NotFoundError, UnprocessableError, ValidationError } from '../shared/errors.js';
import { GRID_COLUMNS, MAX_WIDGETS, copyName, type Place } from './templates.js';

export type Settings = Record<string, unknown>;

/**
 * A widget as stored: its place on the dashboard and its content. Content
 * written by an older version may be missing (`template`/`settings`
 * undefined); reads report such a widget instead of failing.
 */
export interface Widget extends Place {
  id: string;
  template?: string;
  settings?: Settings;
}

export interface HeaderSettings {
  titleFontSize?: number;
  titleFontWeight?: string;
  titleColor?: string;
  descriptionFontSize?: number;
  descriptionColor?: string;
  fontFamily?: string;
  align?: 'left' | 'center' | 'right';
}

export interface Header {
  name: string;
  title?: string;
  description?: string;
  headerSettings?: HeaderSettings;
}

export const HEADER_FIELDS = ['name', 'title', 'description', 'headerSettings'] as const;

export interface LayoutEntry extends Place {
  id: string;
}

export interface ActiveDashboard {
  status: 'active';
  id: string;
  createdBy: string;
  createdAt: string;
  header: Header;
  /** In the order they were added. */
  widgets: Widget[];
}

export type DashboardState = { status: 'none' } | ActiveDashboard | { status: 'deleted' };

export type DashboardEvent =
  | {
      type: 'DashboardCreated';
      data: Header & { id: string; createdBy: string; widgets: Widget[]; duplicateOf?: string; at: string };
    }
  | { type: 'DashboardHeaderChanged'; data: { id: string; changes: Partial<Header>; at: string } }
  | { type: 'LayoutChanged'; data: { id: string; layout: LayoutEntry[]; at: string } }
  | { type: 'WidgetAdded'; data: { id: string; widget: Widget; at: string } }
  | { type: 'WidgetDuplicated'; data: { id: string; widget: Widget; sourceWidgetId: string; at: string } }
  | { type: 'WidgetSettingsReplaced'; data: { id: string; widgetId: string; template: string; settings: Settings; at: string } }
  | { type: 'WidgetDeleted'; data: { id: string; widgetId: string; at: string } }
  | { type: 'DashboardDeleted'; data: { id: string; at: string } };

export const DASHBOARD_EVENTS = new Set<string>([
  'DashboardCreated',
  'DashboardHeaderChanged',
  'LayoutChanged',
  'WidgetAdded',
  'WidgetDuplicated',
  'WidgetSettingsReplaced',
  'WidgetDeleted',
  'DashboardDeleted',
] satisfies DashboardEvent['type'][]);

/**
 * Settings and templates arrive already checked against the template rules
 * (the OpenAPI schemas, applied by the API layer); the decider holds the rules
 * that depend on the dashboard as it is.
 *
 * `raced` marks a second attempt after another writer got in first: a widget
 * that was there at the first attempt and is gone now was deleted
 * concurrently, which is a conflict rather than a wrong id.
 */
export type DashboardCommand =
  | { type: 'CreateDashboard'; id: string; createdBy: string; header: Header; widgets: Widget[]; at: string }
  | { type: 'DuplicateDashboard'; id: string; createdBy: string; source: ActiveDashboard; widgetIds: string[]; at: string }
  | { type: 'ChangeDashboard'; header: Partial<Header>; layout?: LayoutEntry[]; at: string }
  | { type: 'AddWidget'; widget: Widget; at: string }
  | { type: 'ReplaceWidgetSettings'; widgetId: string; template: string; settings: Settings; raced?: boolean; at: string }
  | { type: 'DuplicateWidget'; widgetId: string; newId: string; raced?: boolean; at: string }
  | { type: 'DeleteWidget'; widgetId: string; at: string }
  | { type: 'DeleteDashboard'; at: string };

export const dashboardStream = (id: string) => `dashboard-${id}`;

/** `x + width` fits the 24 columns; `path` is where the place sits in the request (`widgets.3`, or empty). */
export function checkPlace(place: Place, path: string): void {
  if (place.x + place.width > GRID_COLUMNS) {
    const at = path ? `${path}.` : '';
    throw ValidationError.field(`${at}width`, `must be at most ${GRID_COLUMNS - place.x} at x ${place.x} (x + width at most ${GRID_COLUMNS})`);
  }
}

/** A dashboard of `count` widgets stays under the cap; worded as the schema's own `maxItems` refusal of a longer list. */
function checkCount(count: number): void {
  if (count > MAX_WIDGETS) throw ValidationError.field('widgets', `must NOT have more than ${MAX_WIDGETS} items`);
}

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function widgetOf(state: ActiveDashboard, widgetId: string, raced: boolean | undefined): Widget {
  const widget = state.widgets.find((w) => w.id === widgetId);
  if (widget) return widget;
  if (raced) throw new ConflictError('The widget was deleted by another request');
  throw new NotFoundError('Widget not found');
}

export const dashboardDecider: Decider<DashboardCommand, DashboardState, DashboardEvent> = {
  initialState: () => ({ status: 'none' }),

  decide(command, state) {
    if (command.type === 'CreateDashboard' || command.type === 'DuplicateDashboard') {
      if (state.status !== 'none') throw new ConflictError(`Dashboard ${command.id} already exists`);
      if (command.type === 'CreateDashboard') {
        checkCount(command.widgets.length);
        command.widgets.forEach((w, i) => checkPlace(w, `widgets.${i}`));
        return [{ type: 'DashboardCreated', data: { id: command.id, createdBy: command.createdBy, ...command.header, widgets: command.widgets, at: command.at } }];
      }
      const { source, widgetIds } = command;
      if (widgetIds.length !== source.widgets.length) throw new Error('DuplicateDashboard needs one new id per widget');
      // The copy keeps the layout and the widgets, not the header texts or their styling.
      const widgets = source.widgets.map((w, i) => ({ ...structuredClone(w), id: widgetIds[i]! }));
      return [
        {
          type: 'DashboardCreated',
          data: { id: command.id, createdBy: command.createdBy, name: copyName(source.header.name), widgets, duplicateOf: source.id, at: command.at },
        },
      ];
    }
    if (state.status !== 'active') throw new NotFoundError('Dashboard not found');
    const { id } = state;
    switch (command.type) {
      case 'ChangeDashboard': {
        const events: DashboardEvent[] = [];
        const changes: Partial<Header> = {};
        for (const field of HEADER_FIELDS) {
          if (command.header[field] !== undefined && !same(command.header[field], state.header[field])) {
            (changes as Record<string, unknown>)[field] = command.header[field];
          }
        }
        if (Object.keys(changes).length) events.push({ type: 'DashboardHeaderChanged', data: { id, changes, at: command.at } });
        if (command.layout) {
          const layout = command.layout;
          layout.forEach((entry, i) => checkPlace(entry, `widgets.${i}`));
          const listed = new Set(layout.map((e) => e.id));
          if (layout.length !== state.widgets.length || listed.size !== layout.length) {
            throw new UnprocessableError('All existing widgets must be provided');
          }
          const present = new Set(state.widgets.map((w) => w.id));
          const unknown = layout.find((e) => !present.has(e.id));
          if (unknown) throw new NotFoundError(`Widget ${unknown.id} not found on this dashboard`);
          const moved = layout.some((e) => {
            const w = state.widgets.find((x) => x.id === e.id)!;
            return w.x !== e.x || w.y !== e.y || w.width !== e.width || w.height !== e.height;
          });
          if (moved) events.push({ type: 'LayoutChanged', data: { id, layout, at: command.at } });
        }
        return events;
      }
      case 'AddWidget':
        checkPlace(command.widget, '');
        checkCount(state.widgets.length + 1);
        if (state.widgets.some((w) => w.id === command.widget.id)) throw new ConflictError(`Widget ${command.widget.id} already exists`);
        return [{ type: 'WidgetAdded', data: { id, widget: command.widget, at: command.at } }];
      case 'ReplaceWidgetSettings': {
        const widget = widgetOf(state, command.widgetId, command.raced);
        // A widget whose stored content is missing takes the template it is given.
        if (widget.template !== undefined && widget.template !== command.template) throw new ForbiddenError('Cannot change widget template');
        return [{ type: 'WidgetSettingsReplaced', data: { id, widgetId: widget.id, template: command.template, settings: command.settings, at: command.at } }];
      }
      case 'DuplicateWidget': {
        const widget = widgetOf(state, command.widgetId, command.raced);
        checkCount(state.widgets.length + 1);
        const copy: Widget = { ...structuredClone(widget), id: command.newId };
        return [{ type: 'WidgetDuplicated', data: { id, widget: copy, sourceWidgetId: widget.id, at: command.at } }];
      }
      case 'DeleteWidget': {
        const widget = widgetOf(state, command.widgetId, false);
        return [{ type: 'WidgetDeleted', data: { id, widgetId: widget.id, at: command.at } }];
      }
      case 'DeleteDashboard':
        return [{ type: 'DashboardDeleted', data: { id, at: command.at } }];
      default: {
        const _: never = command;
        return _;
      }
    }
  },

  evolve(state, event) {
    if (event.type === 'DashboardCreated') {
      const { id, createdBy, widgets, at, name, title, description, headerSettings } = event.data;
      const header: Header = { name };
      if (title !== undefined) header.title = title;
      if (description !== undefined) header.description = description;
      if (headerSettings !== undefined) header.headerSettings = headerSettings;
      return { status: 'active', id, createdBy, createdAt: at, header, widgets: widgets ?? [] };
    }
    if (state.status !== 'active') return state;
    switch (event.type) {
      case 'DashboardHeaderChanged':
        return { ...state, header: { ...state.header, ...event.data.changes } };
      case 'LayoutChanged': {
        const places = new Map(event.data.layout.map((e) => [e.id, e]));
        return {
          ...state,
          widgets: state.widgets.map((w) => {
            const p = places.get(w.id);
            return p ? { ...w, x: p.x, y: p.y, width: p.width, height: p.height } : w;
          }),
        };
      }
      case 'WidgetAdded':
      case 'WidgetDuplicated':
        return { ...state, widgets: [...state.widgets, event.data.widget] };
      case 'WidgetSettingsReplaced':
        return {
          ...state,
          widgets: state.widgets.map((w) => (w.id === event.data.widgetId ? { ...w, template: event.data.template ?? w.template, settings: event.data.settings } : w)),
        };
      case 'WidgetDeleted':
        return { ...state, widgets: state.widgets.filter((w) => w.id !== event.data.widgetId) };
      case 'DashboardDeleted':
        return { status: 'deleted' };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
