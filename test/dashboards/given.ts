import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';

export const DEVICE = 'aaaaaaaaaaaaaaaaaaaaaaaa';
export const DEVICE_2 = 'bbbbbbbbbbbbbbbbbbbbbbbb';
export const IMAGE = 'cccccccccccccccccccccccc';

/**
 * Each template as the contract describes it: the settings it requires
 * (`minimal` holds exactly those), optional settings with a value to try, and
 * the defaults a write must fill. Written from the contract, not from the
 * implementation's schemas, so the two are checked against each other.
 */
export interface TemplateCase {
  size: [number, number];
  minimal: Record<string, unknown>;
  optional: Record<string, unknown>;
  defaults: Record<string, unknown>;
  /** `image` and `floorPlan` drop unknown settings; the others refuse them. */
  dropsUnknown?: boolean;
}

const chart = {
  deviceId: DEVICE,
  field: 'temperature',
  timePeriod: 'fiftenMinutes',
  resolution: 'full',
  curveType: 'linear',
  yAxisRange: 'auto',
  calculation: 'mean',
  shouldShowHeading: true,
  shouldShowSubheading: false,
};

export const TEMPLATES: Record<string, TemplateCase> = {
  deviceValue: {
    size: [3, 4],
    minimal: { deviceId: DEVICE, field: 'temperature', display: 'gauge', color: '#ff0000', shouldShowHeading: true, shouldShowSubheading: false },
    optional: {
      customHeading: 'Boiler',
      customSubheading: 'Basement',
      unit: '°C',
      minValue: 0,
      maxValue: 100,
      thresholds: [{ value: 80, color: 'red' }],
      barDirection: 'vertical',
      showSparkline: true,
    },
    defaults: { showSparkline: false },
  },
  deviceChart: {
    size: [8, 8],
    minimal: chart,
    optional: { timePeriod: 'custom', customFromTime: '2024-01-01T00:00:00Z', customToTime: '2024-01-02T00:00:00Z', resolution: 'custom', customResolution: 600 },
    defaults: {},
  },
  multiDeviceChart: {
    size: [18, 14],
    minimal: {
      deviceFieldPairs: [{ deviceId: DEVICE, field: 'temperature' }, { deviceId: DEVICE_2, field: 'humidity' }],
      timePeriod: 'day',
      resolution: 'hour',
      curveType: 'monotone',
      yAxisRange: 'fromZero',
      calculation: 'max',
      shouldShowHeading: true,
      shouldShowLegend: true,
    },
    optional: { chartType: 'stackedBar' },
    defaults: { chartType: 'line' },
  },
  multiDeviceValue: {
    size: [8, 8],
    minimal: { items: [{ deviceId: DEVICE, field: 'temperature' }] },
    optional: { items: [{ deviceId: DEVICE, field: 'temperature', label: 'T', unit: '°C', color: 'blue', thresholds: [{ value: 5, color: 'red' }] }], columns: 6, colorMode: 'background', shouldShowHeading: false },
    defaults: { columns: 3, colorMode: 'value', shouldShowHeading: true },
  },
  dataTable: {
    size: [8, 12],
    minimal: { devices: [{ deviceId: DEVICE, fields: ['temperature', 'battery'] }], shouldShowHeading: true },
    optional: {
      columnConfigs: {
        temperature: { field: 'temperature', displayName: 'Temp', displayMode: 'barGauge', thresholds: [{ value: 30, color: 'red', operator: 'gt' }], unit: '°C', min: 0, max: 50 },
      },
      showExportButton: false,
    },
    defaults: { showExportButton: true },
  },
  equalizer: {
    size: [6, 6],
    minimal: { items: [{ deviceId: DEVICE, field: 'level' }] },
    optional: { items: [{ deviceId: DEVICE, field: 'level', label: 'Tank' }], minValue: 0, maxValue: 10 },
    defaults: {},
  },
  swimlane: {
    size: [8, 8],
    minimal: { signals: [{ deviceId: DEVICE, field: 'rssi' }] },
    optional: { signals: [{ deviceId: DEVICE, field: 'rssi', label: 'Signal', unit: 'dBm', color: 'green' }], windowSeconds: 3600 },
    defaults: { windowSeconds: 60 },
  },
  pieChart: {
    size: [6, 8],
    minimal: { field: 'energy', devices: [{ deviceId: DEVICE }] },
    optional: { devices: [{ deviceId: DEVICE, alias: 'Kitchen' }] },
    defaults: {},
  },
  geomap: {
    size: [8, 8],
    minimal: { devices: [{ deviceId: DEVICE }] },
    optional: { devices: [{ deviceId: DEVICE, alias: 'Truck' }], trailLength: 200, tileLayer: 'satellite' },
    defaults: { trailLength: 20, tileLayer: 'street' },
  },
  floorPlan: {
    size: [10, 12],
    minimal: { imageId: IMAGE, name: 'Level 1', devices: [], deviceValues: [], deviceMarkerType: 'seat', shouldSnapToGrid: false, gridCellSize: null },
    optional: {
      devices: [{ deviceId: DEVICE, x: 10.5, y: 20 }, { deviceId: DEVICE_2, x: null, y: null }],
      deviceValues: [{ field: 'occupied', thresholds: [{ value: 1, color: 'red', operator: 'eq' }], isStarred: true }],
      gridCellSize: 5,
      shouldSnapToGrid: true,
    },
    defaults: {},
    dropsUnknown: true,
  },
  map: {
    size: [16, 14],
    minimal: {},
    optional: { viewId: 'view-1', imageId: IMAGE, createGeofenceEnabled: true },
    defaults: {},
  },
  commandButtons: {
    size: [4, 4],
    minimal: { buttons: [{ ruleV2Id: 'dddddddddddddddddddddddd', triggerNodeId: 'node-1', label: 'Open' }] },
    optional: { buttons: [{ ruleV2Id: 'dddddddddddddddddddddddd', triggerNodeId: 'node-1', label: 'Open', icon: 'door', color: 'green', iconOnly: true, textAlign: 'left' }] },
    defaults: { buttons: [{ ruleV2Id: 'dddddddddddddddddddddddd', triggerNodeId: 'node-1', label: 'Open', color: 'blue' }] },
  },
  navigation: {
    size: [4, 2],
    minimal: { targetDashboardId: 'eeeeeeeeeeeeeeeeeeeeeeee' },
    optional: { largeText: 'Floor 2', smallText: 'go', icon: 'arrow', buttonStyle: 'outline', alignment: 'center' },
    defaults: {},
  },
  resourceCount: {
    size: [4, 4],
    minimal: { resource: 'devices' },
    optional: {},
    defaults: {},
  },
  logs: {
    size: [14, 14],
    minimal: {},
    optional: {
      type: ['error', 'warning'],
      priority: ['high'],
      category: 'system',
      timeRange: { start: { type: 'relative', amount: 2, unit: 'hours' }, end: { type: 'now' } },
      title: 'Errors',
    },
    defaults: { resourceType: 'device' },
  },
  text: {
    size: [7, 2],
    minimal: { text: 'Hello', alignment: 'center', color: 'black', fontSize: '2xl', decoration: 'underline' },
    optional: { bold: true, italic: true, fontFamily: 'Inter', backgroundColor: '#eeeeee', verticalAlignment: 'bottom', opacity: 10 },
    // The contract names these as having defaults without giving them; the platform's are in the OpenAPI document.
    defaults: { bold: false, italic: false, fontFamily: 'inherit', backgroundColor: 'transparent', verticalAlignment: 'center', opacity: 100 },
  },
  image: {
    size: [6, 8],
    minimal: { imageId: IMAGE, imageSize: 'large', shape: 'rounded', background: 'no-background', horizontalAlignment: 'right', verticalAlignment: 'upp' },
    optional: {},
    defaults: {},
    dropsUnknown: true,
  },
};

/** Deep equality that ignores key order (the event store keeps JSON objects, not their key order). */
export function sameJson(actual: unknown, expected: unknown, message?: string): void {
  const canon = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(canon) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon((v as Record<string, unknown>)[k])])) : v;
  assert.equal(canon(actual), canon(expected), message);
}

export async function givenDashboard(t: TestPlatform, body: Record<string, unknown> = { name: 'Plant' }, token?: string): Promise<any> {
  const res = await t.call('POST', '/api/dashboards', { body, token });
  assert.is(res.status, 201, res.text);
  return res.body;
}

export async function givenWidget(t: TestPlatform, dashboardId: string, template: string, settings?: Record<string, unknown>, token?: string): Promise<any> {
  const res = await t.call('POST', `/api/dashboards/${dashboardId}/widgets`, { body: { template, settings: settings ?? TEMPLATES[template]!.minimal }, token });
  assert.is(res.status, 201, res.text);
  return res.body;
}

export async function getDashboard(t: TestPlatform, id: string, token?: string): Promise<any> {
  const res = await t.call('GET', `/api/dashboards/${id}`, { token });
  assert.is(res.status, 200, res.text);
  return res.body;
}
