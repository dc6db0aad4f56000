import * as assert from 'uvu/assert';

/** One scrape of `/metrics`, parsed from Prometheus' text format. */
export interface Scrape {
  text: string;
  /** The sample of `name` whose labels include `labels` (exactly one must match); undefined when none does. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Whether any sample of `name` is present. */
  has(name: string): boolean;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseMetrics(text: string): Scrape {
  const samples: { name: string; labels: Record<string, string>; value: number }[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a Prometheus sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (m[2] ?? '').matchAll(LABEL)) labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return {
    text,
    value(name, labels = {}) {
      const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
      if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
      return found[0]?.value;
    },
    has: (name) => samples.some((s) => s.name === name),
  };
}

/** Scrapes the platform's `/metrics` with the metrics token; fails unless it answers 200. */
export async function scrape(baseUrl: string, token: string): Promise<Scrape> {
  const res = await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  const text = await res.text();
  assert.is(res.status, 200, text);
  return parseMetrics(text);
}
