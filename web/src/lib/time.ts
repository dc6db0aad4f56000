/** Seconds of each `timePeriod` of the chart templates. */
export const PERIOD_SECONDS: Record<string, number> = {
  fiftenMinutes: 900,
  thirtyMinutes: 1800,
  hour: 3600,
  threeHours: 10800,
  sixHours: 21600,
  twelveHours: 43200,
  day: 86400,
  week: 604800,
  month: 2592000,
  threeMonths: 7776000,
  sixMonths: 15552000,
  year: 31536000,
};

/** Bucket seconds of each `resolution`; `full` is raw values. */
export const RESOLUTION_SECONDS: Record<string, number | null> = {
  full: null,
  oneMinute: 60,
  fiveMinutes: 300,
  fifteenMinutes: 900,
  thirtyMinutes: 1800,
  hour: 3600,
  threeHours: 10800,
  sixHours: 21600,
  twelveHours: 43200,
  day: 86400,
  week: 604800,
  month: 2592000,
};

export interface ChartWindow {
  start: number;
  end: number;
  distance: number | null;
}

/** The stats query window of a chart's settings (unix seconds), and its bucket width. */
export function chartWindow(s: { timePeriod?: string; resolution?: string; customFromTime?: string; customToTime?: string; customResolution?: number }, now = Date.now()): ChartWindow {
  let end = Math.floor(now / 1000);
  let start = end - (PERIOD_SECONDS[s.timePeriod ?? 'day'] ?? 86400);
  if (s.timePeriod === 'custom') {
    const from = Date.parse(s.customFromTime ?? '');
    const to = Date.parse(s.customToTime ?? '');
    if (!Number.isNaN(from)) start = Math.floor(from / 1000);
    if (!Number.isNaN(to)) end = Math.floor(to / 1000);
  }
  const distance = s.resolution === 'custom' ? (s.customResolution ?? null) : (RESOLUTION_SECONDS[s.resolution ?? 'full'] ?? null);
  return { start, end, distance };
}

/** The stats URL of one device field over a chart window. */
export function statsUrl(deviceId: string, field: string, w: ChartWindow, calculation = 'mean'): string {
  const q = new URLSearchParams({ measurement: field, start: String(w.start), end: String(w.end + 1) });
  if (w.distance) {
    q.set('distance', String(w.distance));
    q.set('calculation', calculation);
  }
  return `/api/iotnodes/${encodeURIComponent(deviceId)}/stats?${q}`;
}
