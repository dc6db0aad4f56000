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
 * Sizes of large nested objects and arrays already measured. A document is
 * never changed in place once built (each event folds into a new one that
 * shares the values it did not change), so a nested value keeps its size; the
 * top level, new after every event, is walked each time: as cheap as the copy
 * that made it. Only values of at least `REMEMBERED_BYTES` are remembered: a
 * document of a million bytes then has at most about a thousand entries here,
 * however many small values it holds (a weak map of hundreds of thousands of
 * entries, `[[], [], …]`, slows every garbage collection of the process), and
 * a small value is walked again for about what remembering it would cost.
 */
const measured = new WeakMap<object, DocSize>();
const REMEMBERED_BYTES = 1024;

/**
 * The size of a JSON value: `fields` counts object keys at every depth,
 * `bytes` its JSON text without whitespace, counting each string's
 * characters without escapes, and leaving out separators.
 */
export function sizeOf(value: unknown): DocSize {
  const size = { bytes: 0, fields: 0 };
  add(size, value, false);
  return size;
}

function add(size: DocSize, value: unknown, nested: boolean): void {
  switch (typeof value) {
    case 'string':
      size.bytes += value.length + 2;
      return;
    case 'number':
      size.bytes += String(value).length;
      return;
    case 'boolean':
      size.bytes += value ? 4 : 5;
      return;
    case 'object':
      break;
    default:
      return;
  }
  if (value === null) {
    size.bytes += 4;
    return;
  }
  const known = nested ? measured.get(value) : undefined;
  if (known) {
    size.bytes += known.bytes;
    size.fields += known.fields;
    return;
  }
  const inner = { bytes: 2, fields: 0 };
  if (Array.isArray(value)) {
    for (const item of value) add(inner, item, true);
  } else {
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
      inner.bytes += key.length + 3;
      inner.fields++;
      add(inner, (value as Record<string, unknown>)[key], true);
    }
  }
  if (nested && inner.bytes >= REMEMBERED_BYTES) measured.set(value, inner);
  size.bytes += inner.bytes;
  size.fields += inner.fields;
}

/** The platform's own timestamps: a change never passes a limit by them alone. */
const STAMPS = ['createdAt', 'updatedAt', 'reportedAt'];

/**
 * The limit a change of a document from `before` to `after` passes, or null.
 * Only growth past a limit counts, so a document already past one (stored
 * before the limit existed) still takes changes that do not make it larger;
 * the timestamps the platform sets are left out of the comparison.
 */
export function limitPassed(before: Record<string, unknown>, after: Record<string, unknown>): 'fields' | 'bytes' | null {
  const is = withoutStamps(after);
  if (is.fields <= DOC_LIMITS.fields && is.bytes <= DOC_LIMITS.bytes) return null;
  const was = withoutStamps(before);
  if (is.fields > DOC_LIMITS.fields && is.fields > was.fields) return 'fields';
  if (is.bytes > DOC_LIMITS.bytes && is.bytes > was.bytes) return 'bytes';
  return null;
}

function withoutStamps(doc: Record<string, unknown>): DocSize {
  const size = sizeOf(doc);
  for (const key of STAMPS) {
    const value = doc[key];
    if (value === undefined) continue;
    const stamp = sizeOf(value);
    size.bytes -= key.length + 3 + stamp.bytes;
    size.fields -= 1 + stamp.fields;
  }
  return size;
}

/** The refusal's reason, as logs and 422 answers give it. */
export const limitMessage = (passed: 'fields' | 'bytes'): string =>
  passed === 'fields' ? `would hold more than ${DOC_LIMITS.fields} fields` : `would be larger than ${DOC_LIMITS.bytes} bytes of JSON`;

/**
 * The device log entry of a report its document left out (logged at most once
 * a minute per device, so a device that keeps reporting past its limits does
 * not fill its log too).
 */
export function refusalEntry(refusal: { eventId: string; deviceId: string; topic: string; limit: 'fields' | 'bytes'; time: string }) {
  return {
    id: refusal.eventId,
    resourceId: refusal.deviceId,
    resourceType: 'device',
    type: 'warning',
    priority: 'high',
    category: 'update',
    message: `Report on ${refusal.topic} left out: the iotnode ${limitMessage(refusal.limit)} (at most ${DOC_LIMITS.fields} fields and ${DOC_LIMITS.bytes} bytes of JSON); reports left out in the next minute are not logged`,
    data: { limit: refusal.limit, fields: DOC_LIMITS.fields, bytes: DOC_LIMITS.bytes },
    at: refusal.time,
  } as const;
}
