/**
 * What an uploaded file is, read from its bytes (never from its name or the
 * type the client declares). Raster formats are recognised by their magic
 * bytes; SVG is text and is served to browsers, so it is also checked for
 * anything that can run code or pull in other content.
 */
export const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp', 'image/svg+xml'] as const;
export type ImageType = (typeof IMAGE_TYPES)[number];

export type Detected = { type: ImageType } | { problem: string };

const startsWith = (bytes: Uint8Array, prefix: number[], at = 0) => prefix.every((b, i) => bytes[at + i] === b);
const ascii = (s: string) => [...s].map((c) => c.charCodeAt(0));

export function detectImage(bytes: Uint8Array): Detected {
  if (bytes.length === 0) return { problem: 'is empty' };
  if (startsWith(bytes, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])) return { type: 'image/png' };
  if (startsWith(bytes, [0xff, 0xd8, 0xff])) return { type: 'image/jpeg' };
  if (startsWith(bytes, ascii('GIF87a')) || startsWith(bytes, ascii('GIF89a'))) return { type: 'image/gif' };
  if (startsWith(bytes, ascii('RIFF')) && startsWith(bytes, ascii('WEBP'), 8)) return { type: 'image/webp' };
  return detectSvg(bytes);
}

const NOT_AN_IMAGE = { problem: 'is not an image (PNG, JPEG, GIF, WebP or SVG)' };

/** Where an SVG document may start: an XML declaration, comments, and a DOCTYPE without an internal subset before the root. */
const SVG_START = /^(?:<\?xml[^>]*\?>)?(?:\s|<!--[\s\S]*?-->)*(?:<!DOCTYPE\s+svg[^>[]*>)?(?:\s|<!--[\s\S]*?-->)*<svg[\s>/]/i;
const SVG_END = /(?:<\/svg\s*>|<svg[^>]*\/>)(?:\s|<!--[\s\S]*?-->)*$/i;

/** Constructs that run code or load other documents inside an SVG. */
const FORBIDDEN: [RegExp, string][] = [
  [/<script[\s>/]/i, 'contains a script'],
  [/<foreignObject[\s>/]/i, 'contains a foreignObject'],
  [/<(?:iframe|embed|object)[\s>/]/i, 'embeds another document'],
  [/<!ENTITY/i, 'declares entities'],
  [/<[^>]*\son[a-z]+\s*=/i, 'has an event-handler attribute'],
];

/** Numeric character references decoded and whitespace removed, as a browser reads an attribute value. */
const normalised = (text: string) =>
  text
    .replace(/&#x([0-9a-f]+);?/gi, (_, hex: string) => String.fromCodePoint(Math.min(parseInt(hex, 16), 0x10ffff)))
    .replace(/&#(\d+);?/g, (_, dec: string) => String.fromCodePoint(Math.min(parseInt(dec, 10), 0x10ffff)))
    .replace(/[\s\u0000-\u001f]+/g, '');

function detectSvg(bytes: Uint8Array): Detected {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return NOT_AN_IMAGE;
  }
  text = text.replace(/^\uFEFF/, '').trim();
  if (!SVG_START.test(text) || !SVG_END.test(text)) return NOT_AN_IMAGE;
  for (const [pattern, why] of FORBIDDEN) if (pattern.test(text)) return { problem: `is an SVG that ${why}` };
  if (/(?:java|vb)script:/i.test(normalised(text))) return { problem: 'is an SVG that has a script link' };
  return { type: 'image/svg+xml' };
}
