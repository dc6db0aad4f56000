import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  dashboardDecider,
  type DashboardCommand,
  type DashboardEvent,
  type Widget,
} from '../../domain/dashboards/dashboard.js';
import { ConflictError, ForbiddenError, NotFoundError, UnprocessableError, ValidationError } from '../../domain/shared/errors.js';
import { deciderSpec } from '../support/decider.js';

const decider = suite('dashboard decider');

const at = '2024-05-01T12:00:00.000Z';
const ID = '111111111111111111111111';
const A: Widget = { id: 'aaaaaaaaaaaaaaaaaaaaaaa1', x: 0, y: 0, width: 3, height: 4, template: 'deviceValue', settings: { deviceId: 'd', field: 'f' } };
const B: Widget = { id: 'aaaaaaaaaaaaaaaaaaaaaaa2', x: 3, y: 0, width: 7, height: 2, template: 'text', settings: { text: 'hi' } };
const created: DashboardEvent = {
  type: 'DashboardCreated',
  data: { id: ID, createdBy: 'user-1', name: 'Plant', title: 'T', description: 'D', headerSettings: { align: 'left' }, widgets: [A, B], at },
};

const given = (events: DashboardEvent[]) => deciderSpec(dashboardDecider).given(events);

decider('given no dashboard, when it is created, then DashboardCreated carries id, creator, header and every widget', () => {
  given([])
    .when({ type: 'CreateDashboard', id: ID, createdBy: 'user-1', header: { name: 'Plant', title: 'T', description: 'D', headerSettings: { align: 'left' } }, widgets: [A, B], at })
    .then([created]);
});

decider('given a dashboard, when it is created again, then a conflict', () => {
  given([created]).when({ type: 'CreateDashboard', id: ID, createdBy: 'u', header: { name: 'x' }, widgets: [], at }).thenThrows(ConflictError);
});

decider('given a widget past the 24th column, when a dashboard is created with it, then a validation error names its width', () => {
  given([])
    .when({ type: 'CreateDashboard', id: ID, createdBy: 'u', header: { name: 'x' }, widgets: [A, { ...B, x: 20, width: 5 }], at })
    .thenThrows(ValidationError, 'ERR - widgets.1.width must be at most 4 at x 20 (x + width at most 24)');
});

decider('given a dashboard, when it is duplicated, then the copy is "<name> (copy)" with every widget in place under new ids and no header texts', () => {
  const { state } = given([created]);
  if (state.status !== 'active') throw new Error('not active');
  given([])
    .when({ type: 'DuplicateDashboard', id: '222222222222222222222222', createdBy: 'user-2', source: state, widgetIds: ['c1', 'c2'], at })
    .then([
      {
        type: 'DashboardCreated',
        data: { id: '222222222222222222222222', createdBy: 'user-2', name: 'Plant (copy)', widgets: [{ ...A, id: 'c1' }, { ...B, id: 'c2' }], duplicateOf: ID, at },
      },
    ]);
});

decider('given dashboards with long names, when each is duplicated, then the copy is cut to fit 50 characters with " (copy)"', () => {
  const copyOf = (name: string) => {
    const { state } = given([{ ...created, data: { ...created.data, name } }]);
    if (state.status !== 'active') throw new Error('not active');
    const [event] = given([]).when({ type: 'DuplicateDashboard', id: '222222222222222222222222', createdBy: 'user-2', source: state, widgetIds: ['c1', 'c2'], at }).events();
    return (event!.data as { name: string }).name;
  };
  assert.is(copyOf('n'.repeat(50)), 'n'.repeat(43) + ' (copy)');
  // Cut by code points, as maxLength counts; a space left at the cut goes.
  assert.is(copyOf('Ä'.repeat(30) + 'x'.repeat(12) + ' yz'), 'Ä'.repeat(30) + 'x'.repeat(12) + ' (copy)');
  assert.is(copyOf('😀'.repeat(50)), '😀'.repeat(43) + ' (copy)');
  assert.is(copyOf('n'.repeat(43)), 'n'.repeat(43) + ' (copy)');
});

decider('given a dashboard, when the layout lists every widget, then LayoutChanged; when nothing moves, then no event', () => {
  const layout = [
    { id: A.id, x: 0, y: 5, width: 3, height: 4 },
    { id: B.id, x: 3, y: 0, width: 7, height: 2 },
  ];
  given([created]).when({ type: 'ChangeDashboard', header: {}, layout, at }).then([{ type: 'LayoutChanged', data: { id: ID, layout, at } }]);
  const same = [A, B].map(({ id, x, y, width, height }) => ({ id, x, y, width, height }));
  given([created]).when({ type: 'ChangeDashboard', header: {}, layout: same, at }).then([]);
});

decider('given a dashboard, when the layout misses a widget or lists one twice, then All existing widgets must be provided', () => {
  const a = { id: A.id, x: 0, y: 0, width: 1, height: 1 };
  given([created]).when({ type: 'ChangeDashboard', header: {}, layout: [a], at }).thenThrows(UnprocessableError, 'All existing widgets must be provided');
  given([created]).when({ type: 'ChangeDashboard', header: {}, layout: [a, a], at }).thenThrows(UnprocessableError, 'All existing widgets must be provided');
});

decider('given a dashboard, when the layout names a widget not on it, then not found', () => {
  const layout = [
    { id: A.id, x: 0, y: 0, width: 1, height: 1 },
    { id: 'ffffffffffffffffffffffff', x: 0, y: 0, width: 1, height: 1 },
  ];
  given([created]).when({ type: 'ChangeDashboard', header: {}, layout, at }).thenThrows(NotFoundError);
});

decider('given a dashboard, when header fields change, then only the changed ones are in DashboardHeaderChanged', () => {
  given([created])
    .when({ type: 'ChangeDashboard', header: { name: 'Plant', title: 'New' }, at })
    .then([{ type: 'DashboardHeaderChanged', data: { id: ID, changes: { title: 'New' }, at } }]);
});

decider('given a widget, when its settings are replaced under the same template, then WidgetSettingsReplaced; under another template, then Cannot change widget template', () => {
  given([created])
    .when({ type: 'ReplaceWidgetSettings', widgetId: B.id, template: 'text', settings: { text: 'new' }, at })
    .then([{ type: 'WidgetSettingsReplaced', data: { id: ID, widgetId: B.id, template: 'text', settings: { text: 'new' }, at } }]);
  given([created]).when({ type: 'ReplaceWidgetSettings', widgetId: B.id, template: 'image', settings: {}, at }).thenThrows(ForbiddenError, 'Cannot change widget template');
});

decider('given a widget gone, when its settings are replaced, then not found at first, and a conflict when it vanished during a retry', () => {
  const gone: DashboardEvent = { type: 'WidgetDeleted', data: { id: ID, widgetId: B.id, at } };
  const put: DashboardCommand = { type: 'ReplaceWidgetSettings', widgetId: B.id, template: 'text', settings: {}, at };
  given([created, gone]).when(put).thenThrows(NotFoundError);
  given([created, gone]).when({ ...put, raced: true }).thenThrows(ConflictError);
});

decider('given a widget, when it is duplicated, then the copy has its settings, size and place under the new id', () => {
  given([created])
    .when({ type: 'DuplicateWidget', widgetId: A.id, newId: 'copy-of-a', at })
    .then([{ type: 'WidgetDuplicated', data: { id: ID, widget: { ...A, id: 'copy-of-a' }, sourceWidgetId: A.id, at } }]);
});

decider('given a dashboard of 500 widgets, when one more is added or duplicated, then a validation error names widgets and no event', () => {
  const full: DashboardEvent = {
    type: 'DashboardCreated',
    data: { id: ID, createdBy: 'u', name: 'Full', widgets: Array.from({ length: 500 }, (_, i) => ({ ...B, id: `w${i}` })), at },
  };
  given([full]).when({ type: 'AddWidget', widget: A, at }).thenThrows(ValidationError, 'ERR - widgets must NOT have more than 500 items');
  given([full]).when({ type: 'DuplicateWidget', widgetId: 'w0', newId: 'w500', at }).thenThrows(ValidationError, 'ERR - widgets must NOT have more than 500 items');
  given([]).when({ type: 'CreateDashboard', id: ID, createdBy: 'u', header: { name: 'x' }, widgets: Array.from({ length: 501 }, (_, i) => ({ ...B, id: `w${i}` })), at }).thenThrows(ValidationError);
  const deleted: DashboardEvent = { type: 'WidgetDeleted', data: { id: ID, widgetId: 'w0', at } };
  given([full, deleted]).when({ type: 'AddWidget', widget: A, at }).then([{ type: 'WidgetAdded', data: { id: ID, widget: A, at } }]);
});

decider('given a deleted dashboard, when anything is decided on it, then not found', () => {
  const deleted: DashboardEvent = { type: 'DashboardDeleted', data: { id: ID, at } };
  given([created, deleted]).when({ type: 'AddWidget', widget: A, at }).thenThrows(NotFoundError);
  given([created, deleted]).when({ type: 'DeleteDashboard', at }).thenThrows(NotFoundError);
});

decider('given events, when evolved, then the state follows: added, moved, replaced, deleted', () => {
  const events: DashboardEvent[] = [
    created,
    { type: 'WidgetAdded', data: { id: ID, widget: { ...A, id: 'n1' }, at } },
    { type: 'LayoutChanged', data: { id: ID, layout: [{ id: 'n1', x: 9, y: 9, width: 1, height: 1 }], at } },
    { type: 'WidgetSettingsReplaced', data: { id: ID, widgetId: 'n1', template: 'deviceValue', settings: { x: 1 }, at } },
    { type: 'WidgetDeleted', data: { id: ID, widgetId: A.id, at } },
  ];
  const { state } = given(events);
  if (state.status !== 'active') throw new Error('not active');
  assert.equal(state.widgets, [B, { ...A, id: 'n1', x: 9, y: 9, width: 1, height: 1, settings: { x: 1 } }]);
});

decider.run();
