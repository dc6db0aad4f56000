/**
 * The one check of JSON text and shape at the platform's edges: every REST
 * body and query, every MQTT payload and every translator result passes it
 * before anything recursive (validation, `JSON.stringify`, the database) sees
 * it. PostgreSQL's `text` and `jsonb` refuse NUL and lone surrogates, which
 * JSON parsing accepts; `JSON.stringify` and recursive walks overflow the
 * stack on deeply nested values (10,000 levels fit in 20 KB). The walk here is
 * iterative, so it never overflows whatever it is given.
 */
export interface JsonLimits {
  /** Nesting levels of objects and arrays; the value itself is level 1 when it is an object or array. */
  maxDepth: number;
  /** Characters of an object key. */
  maxKeyLength: number;
}

/** The platform's limits for JSON it takes in (docs/security.md lists them with the others). */
export const JSON_LIMITS: JsonLimits = { maxDepth: 32, maxKeyLength: 256 };

export interface JsonProblem {
  /** Dotted path of the offending value or key (`widgets.0.settings.text`); empty for the value itself. */
  path: string;
  /** Why, as the end of a sentence about the path: `must not contain NUL characters`. */
  why: string;
}

interface Frame {
  value: unknown;
  depth: number;
  parent: Frame | null;
  key: string;
}

const pathOf = (frame: Frame | null, key?: string): string => {
  const parts: string[] = key === undefined ? [] : [key];
  for (let f = frame; f && f.parent; f = f.parent) parts.push(f.key);
  return parts.reverse().join('.');
};

/** Why a string cannot be stored, or null. */
export function textProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL characters';
  if (!(s as string & { isWellFormed(): boolean }).isWellFormed()) return 'must not contain lone UTF-16 surrogates';
  return null;
}

/**
 * `s` with each NUL and lone surrogate written out as its escape (`\u0000`,
 * `\ud800`), so text the platform writes itself (a log message quoting a
 * client's topic, field name or error) is always storable and still shows
 * what was sent.
 */
export function storableText(s: string): string {
  if (textProblem(s) === null) return s;
  return s.replace(/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** At most `max` UTF-16 units of `s`, never ending in half a surrogate pair (which no text column stores). */
export function cutText(s: string, max: number): string {
  if (s.length <= max) return s;
  const last = s.charCodeAt(max - 1);
  return s.slice(0, last >= 0xd800 && last <= 0xdbff ? max - 1 : max);
}

/**
 * The first reason `value` cannot be taken in, or null: a string or key with
 * NUL or a lone surrogate, a key longer than `maxKeyLength`, nesting deeper
 * than `maxDepth`, or a number that is not finite.
 */
export function jsonProblem(value: unknown, limits: JsonLimits = JSON_LIMITS): JsonProblem | null {
  const stack: Frame[] = [{ value, depth: 0, parent: null, key: '' }];
  while (stack.length) {
    const frame = stack.pop()!;
    const v = frame.value;
    if (typeof v === 'string') {
      const why = textProblem(v);
      if (why) return { path: pathOf(frame), why };
    } else if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path: pathOf(frame), why: 'must be a finite number' };
    } else if (v !== null && typeof v === 'object') {
      const depth = frame.depth + 1;
      if (depth > limits.maxDepth) return { path: pathOf(frame), why: `is nested deeper than ${limits.maxDepth} levels` };
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], depth, parent: frame, key: String(i) });
      } else {
        const keys = Object.keys(v);
        for (let i = keys.length - 1; i >= 0; i--) {
          const key = keys[i]!;
          if (key.length > limits.maxKeyLength) return { path: pathOf(frame, key.slice(0, 40) + '…'), why: `is a field name longer than ${limits.maxKeyLength} characters` };
          const why = textProblem(key);
          if (why) return { path: pathOf(frame, JSON.stringify(key).slice(1, -1)), why: `is a field name that ${why.replace(/^must/, 'must')}` };
          stack.push({ value: (v as Record<string, unknown>)[key], depth, parent: frame, key });
        }
      }
    }
  }
  return null;
}
