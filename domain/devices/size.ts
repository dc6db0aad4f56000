/**
 * How large a device's document may grow. Every report rewrites the document
 * (the devices read model, the output topics and channels, the translators'
 * cache), so without a bound one device that keeps reporting new fields makes
 * every later report of it cost more, for every tenant sharing the platform,
 * until the document passes what PostgreSQL's `jsonb` holds (256 MB) and the
 * read models stop. A report's own size is bounded at the broker (256 KiB);
 * this bounds what reports add up to.
 */
export const DOC_LIMITS = {
  /** Object keys at every depth (`{"a": {"b": 1}}` holds two). */
  fields: 1000,
  /** The document's JSON text, about (`sizeOf` counts it without escapes). */
  bytes: 1024 * 1024,
} as const;

export interface DocSize {
  bytes: number;
  fields: number;
}

/**
 * Sizes of objects and arrays already measured. Documents are never changed
 * in place once built (each event folds into a new one that shares the
 * unchanged values), so a measured value keeps its size.
 */
const measured = new WeakMap<object, DocSize>();

/**
 * The size of a JSON value: `fields` counts object keys at every depth,
 * `bytes` its JSON text without whitespace, counting each string's
 * characters without escapes and leaving out separators. Additive, so a
 * document's size after a change is its size before plus what the changed
 * fields add and minus what they had (`entrySize`).
 */
export function sizeOf(value: unknown): DocSize {
  if (typeof value !== 'object' || value === null) return { bytes: leafBytes(value), fields: 0 };
  const known = measured.get(value);
  if (known) return known;
  const size = { bytes: 2, fields: 0 };
  if (Array.isArray(value)) {
    for (const item of value) add(size, item);
  } else {
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
      size.bytes += key.length + 3;
      size.fields++;
      add(size, (value as Record<string, unknown>)[key]);
    }
  }
  measured.set(value, size);
  return size;
}

function add(size: DocSize, value: unknown): void {
  if (typeof value !== 'object' || value === null) {
    size.bytes += leafBytes(value);
    return;
  }
  const inner = sizeOf(value);
  size.bytes += inner.bytes;
  size.fields += inner.fields;
}

function leafBytes(value: unknown): number {
  switch (typeof value) {
    case 'string':
      return value.length + 2;
    case 'number':
      return String(value).length;
    case 'boolean':
      return value ? 4 : 5;
    default:
      // null; `undefined` is no JSON value and a document never holds one.
      return 4;
  }
}

/** What one field `key: value` adds to an object's size; nothing for a field that is not there. */
function entrySize(key: string, value: unknown): DocSize {
  if (value === undefined) return { bytes: 0, fields: 0 };
  const inner = sizeOf(value);
  return { bytes: key.length + 3 + inner.bytes, fields: 1 + inner.fields };
}

/**
 * The size of `after`, a copy of `before` in which only the top-level fields
 * `keys` may differ: `before`'s size (measured once, then remembered) with
 * those fields' sizes swapped, so a report costs what it changes, not what
 * the document holds.
 */
export function sizeAfter(before: object, after: Record<string, unknown>, keys: Iterable<string>): DocSize {
  const known = measured.get(after);
  if (known) return known;
  const base = sizeOf(before);
  const size = { bytes: base.bytes, fields: base.fields };
  for (const key of new Set(keys)) {
    const was = entrySize(key, (before as Record<string, unknown>)[key]);
    const is = entrySize(key, after[key]);
    size.bytes += is.bytes - was.bytes;
    size.fields += is.fields - was.fields;
  }
  measured.set(after, size);
  return size;
}

/** The platform's own timestamps: a change never passes a limit by them alone. */
const STAMPS = ['createdAt', 'updatedAt', 'reportedAt'];

/**
 * The limit that `after`, a copy of `before` differing only in the top-level
 * fields `keys`, passes, or null. Only growth past a limit counts, so a
 * document already past one (stored before the limit existed) still takes
 * changes that do not make it larger; the timestamps the platform sets are
 * left out of that growth.
 */
export function limitPassed(before: Record<string, unknown>, after: Record<string, unknown>, keys: Iterable<string>): 'fields' | 'bytes' | null {
  const was = sizeOf(before);
  const is = sizeAfter(before, after, keys);
  let { fields, bytes } = is;
  for (const key of STAMPS) {
    const stampWas = entrySize(key, before[key]);
    const stampIs = entrySize(key, after[key]);
    fields -= stampIs.fields - stampWas.fields;
    bytes -= stampIs.bytes - stampWas.bytes;
  }
  if (fields > DOC_LIMITS.fields && fields > was.fields) return 'fields';
  if (bytes > DOC_LIMITS.bytes && bytes > was.bytes) return 'bytes';
  return null;
}

/** The refusal's reason, as logs and 422 answers give it. */
export const limitMessage = (passed: 'fields' | 'bytes'): string =>
  passed === 'fields' ? `would hold more than ${DOC_LIMITS.fields} fields` : `would be larger than ${DOC_LIMITS.bytes} bytes of JSON`;
