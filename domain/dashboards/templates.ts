/**
 * The widget templates and their grid sizes (width x height, in grid units).
 * The settings rules of each template live in the OpenAPI document
 * (`<Template>Settings` in `components.schemas`); this table holds what the
 * grid needs. The minimum is not enforced: a smaller size is saved as given,
 * and the control panel grows the widget when the layout is edited.
 */
export const TEMPLATES = {
  deviceValue: { size: [3, 4], min: [3, 4] },
  deviceChart: { size: [8, 8], min: [4, 5] },
  multiDeviceChart: { size: [18, 14], min: [6, 6] },
  multiDeviceValue: { size: [8, 8], min: [3, 3] },
  dataTable: { size: [8, 12], min: [6, 6] },
  equalizer: { size: [6, 6], min: [2, 3] },
  swimlane: { size: [8, 8], min: [3, 3] },
  pieChart: { size: [6, 8], min: [3, 3] },
  geomap: { size: [8, 8], min: [3, 3] },
  floorPlan: { size: [10, 12], min: [6, 4] },
  map: { size: [16, 14], min: [4, 3] },
  commandButtons: { size: [4, 4], min: [2, 2] },
  navigation: { size: [4, 2], min: [3, 2] },
  resourceCount: { size: [4, 4], min: [3, 4] },
  logs: { size: [14, 14], min: [6, 6] },
  text: { size: [7, 2], min: [3, 2] },
  image: { size: [6, 8], min: [2, 2] },
} as const satisfies Record<string, { size: readonly [number, number]; min: readonly [number, number] }>;

export type Template = keyof typeof TEMPLATES;

export const TEMPLATE_NAMES = Object.keys(TEMPLATES) as Template[];

export const isTemplate = (s: unknown): s is Template => typeof s === 'string' && Object.hasOwn(TEMPLATES, s);

/** The grid is 24 columns wide. */
export const GRID_COLUMNS = 24;

/**
 * The most widgets a dashboard holds: what a create (import) and a layout
 * PATCH accept (`maxItems` in the OpenAPI document), so every dashboard can
 * be exported, imported and laid out again.
 */
export const MAX_WIDGETS = 500;

/** The longest dashboard name, in characters (`DashboardName` in the OpenAPI document). */
export const NAME_MAX = 50;

/**
 * A duplicate's name, `<name> (copy)`, within NAME_MAX, so a copy can be
 * exported, imported and renamed like any dashboard. A name that fits is kept
 * as it is, spaces and all; a longer one is cut first to NAME_MAX minus the
 * suffix (by code points, as the document's `maxLength` counts) and loses the
 * spaces the cut leaves at its end.
 */
export function copyName(name: string): string {
  const suffix = ' (copy)';
  const points = [...name];
  const room = NAME_MAX - suffix.length;
  return (points.length <= room ? name : points.slice(0, room).join('').trimEnd()) + suffix;
}

/** Where an added widget lands: the left edge, below everything (the grid packs it upwards). */
export const ADDED_X = 0;
export const ADDED_Y = 99;

export interface Place {
  x: number;
  y: number;
  width: number;
  height: number;
}

/** A place for a widget whose request left some of it out: x 0, y 99, the template's default size. */
export function placeOf(template: Template, given: Partial<Place>): Place {
  const [width, height] = TEMPLATES[template].size;
  return { x: given.x ?? ADDED_X, y: given.y ?? ADDED_Y, width: given.width ?? width, height: given.height ?? height };
}
