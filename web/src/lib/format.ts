/** A value as text: numbers with at most 2 decimals, booleans as words, objects as JSON. */
export function formatValue(v: unknown, unit?: string): string {
  if (v === undefined || v === null) return '–';
  let text: string;
  if (typeof v === 'number') text = Number.isInteger(v) ? String(v) : v.toFixed(Math.abs(v) >= 100 ? 1 : 2).replace(/\.?0+$/, '');
  else if (typeof v === 'boolean') text = v ? 'true' : 'false';
  else if (typeof v === 'string') text = v;
  else text = JSON.stringify(v);
  return unit ? `${text} ${unit}` : text;
}

export const toNumber = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'boolean' ? Number(v) : typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v)) ? Number(v) : null);

export interface Threshold {
  value: number;
  color: string;
  operator?: 'gt' | 'gte' | 'eq' | 'lte' | 'lt';
}

const meets = (v: number, t: Threshold): boolean => {
  switch (t.operator ?? 'gte') {
    case 'gt':
      return v > t.value;
    case 'gte':
      return v >= t.value;
    case 'eq':
      return v === t.value;
    case 'lte':
      return v <= t.value;
    case 'lt':
      return v < t.value;
  }
};

/**
 * The colour thresholds give a value. Bands (no operator): the band of the
 * highest threshold at or below the value. Conditions: the last one met.
 */
export function thresholdColor(value: unknown, thresholds: Threshold[] | undefined, fallback: string): string {
  const v = toNumber(value);
  if (v === null || !thresholds?.length) return fallback;
  let color = fallback;
  if (thresholds.some((t) => t.operator)) {
    for (const t of thresholds) if (meets(v, t)) color = t.color;
    return color;
  }
  for (const t of [...thresholds].sort((a, b) => a.value - b.value)) if (v >= t.value) color = t.color;
  return color;
}

export const relativeTime = (iso: unknown): string => {
  const t = typeof iso === 'string' ? Date.parse(iso) : NaN;
  if (Number.isNaN(t)) return 'never';
  const s = Math.round((Date.now() - t) / 1000);
  if (s < 5) return 'just now';
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(t).toLocaleString();
};

/** Base64 of a UTF-8 string, and back (the dashboard export format). */
export function toBase64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let bin = '';
  for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(bin);
}
export function fromBase64(b64: string): string {
  const bin = atob(b64.replace(/\s+/g, ''));
  return new TextDecoder().decode(Uint8Array.from(bin, (c) => c.charCodeAt(0)));
}
