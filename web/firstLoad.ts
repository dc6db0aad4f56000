import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

interface Chunk {
  file: string;
  isEntry?: boolean;
  imports?: string[];
  css?: string[];
}

/**
 * The JavaScript a first visit loads before anything is shown: the entry
 * chunk and every chunk it imports statically (Vite's manifest), gzipped as
 * a server would send them. Lazy chunks (pages, widget families, forms,
 * MQTT.js) load later and are listed apart.
 */
export function firstLoad(dist: string): { gzipBytes: number; files: string[]; lazyGzipBytes: number } {
  const manifest = JSON.parse(readFileSync(join(dist, '.vite', 'manifest.json'), 'utf8')) as Record<string, Chunk>;
  const entry = Object.entries(manifest).find(([, c]) => c.isEntry);
  if (!entry) throw new Error('the manifest has no entry chunk');
  const files = new Set<string>();
  const visit = (key: string) => {
    const c = manifest[key]!;
    if (files.has(c.file)) return;
    files.add(c.file);
    for (const i of c.imports ?? []) visit(i);
  };
  visit(entry[0]);
  const gz = (file: string) => gzipSync(readFileSync(join(dist, file)), { level: 9 }).length;
  const all = new Set(Object.values(manifest).map((c) => c.file).filter((f) => f.endsWith('.js')));
  let lazy = 0;
  for (const f of all) if (!files.has(f)) lazy += gz(f);
  return { gzipBytes: [...files].reduce((s, f) => s + gz(f), 0), files: [...files], lazyGzipBytes: lazy };
}
