import { randomBytes, randomUUID } from 'node:crypto';

/** Resources get 24-character hexadecimal ids. */
export const newResourceId = (): string => randomBytes(12).toString('hex');

/** Users get UUIDs, as an identity provider gives them. */
export const newUserId = (): string => randomUUID();

/**
 * A new event's id: a UUIDv7 (RFC 9562), the Unix time in milliseconds in
 * its first 48 bits and 74 random bits after the version and variant. The
 * log's unique index on event ids then takes each new id at its right edge,
 * on pages already in memory, where a random (v4) id lands on any page of an
 * index that grows with the log: PostgreSQL spent about a sixth less CPU per
 * appended event (docs/benchmarks.md, "Event ids in time order"). The time
 * is when the id was made, not when the event happened; nothing reads it
 * back. Ids derived from what caused an event (a rule run's, a
 * calculation's result) stay as they are: their point is to be the same on
 * every retry, and a batch handled before an upgrade and again after it
 * would otherwise store its effects twice.
 */
export function newEventId(now: number = Date.now()): string {
  const time = now.toString(16).padStart(12, '0');
  // randomUUID() is `xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx` (V: the variant); from index 15 on it is random bits and the variant.
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${randomUUID().slice(15)}`;
}

export const RESOURCE_ID = /^[0-9a-f]{24}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isResourceId = (s: unknown): s is string => typeof s === 'string' && RESOURCE_ID.test(s);
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID.test(s);
