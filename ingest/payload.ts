import { hash } from 'node:crypto';
import { jsonProblem, textProblem } from '../domain/shared/json.js';

/** Payloads above this size are refused (acknowledged, not stored, logged): 256 KiB. */
export const MAX_PAYLOAD_BYTES = 256 * 1024;

/**
 * The edge check of a device's MQTT message, wherever it comes from (the
 * platform's own broker, or a Generic connector's external broker): at most
 * `MAX_PAYLOAD_BYTES`, a topic PostgreSQL can store, a JSON object that passes
 * the platform's text and shape limits (`domain/shared/json.ts`). Returns the
 * object, or why it is refused, as the end of a sentence.
 */
export function readPayload(topic: string, payload: Buffer): { body: Record<string, unknown> } | { why: string } {
  if (payload.length > MAX_PAYLOAD_BYTES) return { why: `the payload is larger than ${MAX_PAYLOAD_BYTES} bytes` };
  const inTopic = textProblem(topic);
  if (inTopic) return { why: `the topic ${inTopic}` };
  let body: unknown;
  try {
    body = JSON.parse(payload.toString('utf8'));
  } catch {
    return { why: 'the payload is not JSON' };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { why: 'the payload is not a JSON object' };
  // Text PostgreSQL cannot store, and nesting that would overflow a recursive walk, are refused here, alone.
  const problem = jsonProblem(body);
  if (problem) return { why: `${problem.path ? `the field ${problem.path}` : 'the payload'} ${problem.why} (docs/security.md lists the limits)` };
  return { body: body as Record<string, unknown> };
}

/** A message's content hash (topic and payload), part of its correlation id and of how a re-send is recognised. */
export const messageHash = (topic: string, payload: Buffer | string): string =>
  // The one-shot hash costs half of a Hash object's on a message this small.
  hash('sha1', typeof payload === 'string' ? `${topic}\u0000${payload}` : Buffer.concat([Buffer.from(`${topic}\u0000`), payload]), 'hex').slice(0, 16);
