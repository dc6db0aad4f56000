/** PostgreSQL `jsonb` parameters as `pg` sends them. */

/** Items per JSON text of a large `jsonb` parameter (`jsonbArray`): 32 events are about 16 KB, 32 device documents of a few KB each well under 128 KB. */
export const JSON_CHUNK = 32;

/**
 * A JSON array as a `jsonb` parameter. Up to `JSON_CHUNK` items it is one
 * JSON text. Past that it is sent in PostgreSQL's binary form of `jsonb` (a
 * version byte, 1, then the same text) written into a buffer from texts of
 * `JSON_CHUNK` items each, so that no JavaScript string holds the whole batch:
 * `pg` must flatten and measure a string parameter before it sends it, and V8
 * makes the flat copy of a string over 128 KB in its large-object space, which
 * costs about a millisecond on the benchmark machine, against a tenth of that
 * for the chunks (docs/benchmarks.md, "Large JSON parameters written in
 * pieces").
 */
export function jsonbArray(items: unknown[]): string | Buffer {
  if (items.length <= JSON_CHUNK) return JSON.stringify(items);
  const texts: string[] = [];
  let size = 1;
  for (let i = 0; i < items.length; i += JSON_CHUNK) {
    const text = JSON.stringify(items.slice(i, i + JSON_CHUNK));
    texts.push(text);
    size += Buffer.byteLength(text);
  }
  const buffer = Buffer.allocUnsafe(size);
  buffer[0] = 1;
  let at = 1;
  for (let k = 0; k < texts.length; k++) {
    // `[a,b]` and `[c]` become `[a,b,c]`: each later text's `[` is overwritten by a comma, each earlier one's `]` by what follows.
    const written = buffer.write(texts[k]!, at);
    if (k > 0) buffer[at] = 0x2c;
    at += k < texts.length - 1 ? written - 1 : written;
  }
  return buffer.subarray(0, at);
}
