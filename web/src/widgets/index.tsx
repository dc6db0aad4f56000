import { lazy, type ComponentType, type LazyExoticComponent } from 'react';
import type { WidgetProps } from './common';

type W = LazyExoticComponent<ComponentType<WidgetProps<any>>> | ComponentType<WidgetProps<any>>;

// Each family is its own chunk: a dashboard without charts or maps never loads chart.js or Leaflet.
const values = () => import('./values');
const charts = () => import('./charts');
const maps = () => import('./maps');
const misc = () => import('./misc');

export const WIDGETS: Record<string, W> = {
  deviceValue: lazy(() => values().then((m) => ({ default: m.DeviceValue }))),
  multiDeviceValue: lazy(() => values().then((m) => ({ default: m.MultiDeviceValue }))),
  dataTable: lazy(() => values().then((m) => ({ default: m.DataTable }))),
  equalizer: lazy(() => values().then((m) => ({ default: m.Equalizer }))),
  swimlane: lazy(() => values().then((m) => ({ default: m.Swimlane }))),
  deviceChart: lazy(() => charts().then((m) => ({ default: m.DeviceChart }))),
  multiDeviceChart: lazy(() => charts().then((m) => ({ default: m.MultiDeviceChart }))),
  pieChart: lazy(() => charts().then((m) => ({ default: m.PieChart }))),
  geomap: lazy(() => maps().then((m) => ({ default: m.Geomap }))),
  floorPlan: lazy(() => maps().then((m) => ({ default: m.FloorPlan }))),
  map: lazy(() => maps().then((m) => ({ default: m.DeviceMapWidget }))),
  commandButtons: lazy(() => misc().then((m) => ({ default: m.CommandButtons }))),
  navigation: lazy(() => misc().then((m) => ({ default: m.Navigation }))),
  resourceCount: lazy(() => misc().then((m) => ({ default: m.ResourceCount }))),
  logs: lazy(() => misc().then((m) => ({ default: m.Logs }))),
  text: lazy(() => misc().then((m) => ({ default: m.Text }))),
  image: lazy(() => misc().then((m) => ({ default: m.ImageWidget }))),
};

export const TEMPLATE_LABELS: Record<string, string> = {
  deviceValue: 'Device value',
  deviceChart: 'Device chart',
  multiDeviceChart: 'Multi-device chart',
  multiDeviceValue: 'Multi-device values',
  dataTable: 'Data table',
  equalizer: 'Equalizer',
  swimlane: 'Swimlane',
  pieChart: 'Pie chart',
  geomap: 'Geomap (trails)',
  floorPlan: 'Floor plan',
  map: 'Map',
  commandButtons: 'Command buttons',
  navigation: 'Navigation',
  resourceCount: 'Resource count',
  logs: 'Logs',
  text: 'Text',
  image: 'Image',
};
