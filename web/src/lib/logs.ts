const UNIT_SECONDS: Record<string, number> = { second: 1, seconds: 1, minute: 60, minutes: 60, hour: 3600, hours: 3600, day: 86400, days: 86400, week: 604800, weeks: 604800, month: 2592000, months: 2592000 };

/** The logs widget's settings as a `GET /api/logs` query; a relative `timeRange` becomes `from`. */
export function logsQuery(s: { resourceType?: string; type?: string[]; priority?: string[]; category?: string; timeRange?: { start: { amount: number; unit: string } } }, now = Date.now()): string {
  const q = new URLSearchParams({ limit: '50', resourceType: s.resourceType ?? 'device' });
  if (s.type?.length) q.set('type', s.type.join(','));
  if (s.priority?.length) q.set('priority', s.priority.join(','));
  if (s.category) q.set('category', s.category);
  if (s.timeRange) q.set('from', new Date(now - s.timeRange.start.amount * (UNIT_SECONDS[s.timeRange.start.unit] ?? 3600) * 1000).toISOString());
  return `/api/logs?${q}`;
}

