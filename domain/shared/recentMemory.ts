/**
 * A bounded map of the most recent entries: between `capacity / 2` and
 * `capacity` of them, in two generations. When the young generation is full it
 * becomes the old one and the old one is dropped; reading an old entry brings
 * it back into the young one, so entries in use stay. Every operation is O(1).
 *
 * Why not one `Map` that evicts its oldest key through `keys().next()`: once
 * full, that iterator steps over every entry deleted since V8 last rehashed the
 * table, so each eviction costs more than the last (200,000 entries took
 * seconds per 100,000 inserts).
 */
export class RecentMemory<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();

  constructor(private readonly capacity: number) {
    if (capacity < 2) throw new Error('a RecentMemory holds at least two entries');
  }

  /** The entry's value; an entry kept with the value `undefined` reads as absent (so a miss, the usual case of a cache, costs two lookups, not three). */
  get(key: K): V | undefined {
    const value = this.young.get(key);
    if (value !== undefined) return value;
    const kept = this.old.get(key);
    if (kept === undefined) return undefined;
    this.set(key, kept);
    return kept;
  }

  has(key: K): boolean {
    return this.young.has(key) || this.old.has(key);
  }

  set(key: K, value: V): void {
    this.old.delete(key);
    this.young.set(key, value);
    if (this.young.size >= this.capacity / 2) {
      this.old = this.young;
      this.young = new Map();
    }
  }

  delete(key: K): void {
    this.young.delete(key);
    this.old.delete(key);
  }

  get size(): number {
    return this.young.size + this.old.size;
  }
}
