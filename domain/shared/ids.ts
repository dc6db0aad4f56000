import { createHash, randomBytes, randomUUID } from 'node:crypto';

/** Resources get 24-character hexadecimal ids. */
export const newResourceId = (): string => randomBytes(12).toString('hex');

/** Users get UUIDs, as an identity provider gives them. */
export const newUserId = (): string => randomUUID();

/**
 * A new event's id: a UUIDv7 (RFC 9562), the Unix time in milliseconds in
 * its first 48 bits and 74 random bits after the version and variant. The
 * log's unique index on event ids then takes each new id at its right edge,
 * on pages already in memory, where a random (v4) id lands on any page of an
 * index that grows with the log: PostgreSQL spent about a fifth less CPU per
 * appended event (docs/benchmarks.md, "Event ids in time order"). The time
 * is when the id was made, not when the event happened; nothing reads it
 * back. Ids of events caused by others are derived (`causedId`), and in
 * time order when their cause's id is.
 */
export function newEventId(now: number = Date.now()): string {
  const time = now.toString(16).padStart(12, '0');
  // randomUUID() is `xxxxxxxx-xxxx-4xxx-Vxxx-xxxxxxxxxxxx` (V: the variant); from index 15 on it is random bits and the variant.
  return `${time.slice(0, 8)}-${time.slice(8, 12)}-7${randomUUID().slice(15)}`;
}

const hashOf = (parts: string[]): string => createHash('sha256').update(parts.join('/')).digest('hex');

/** `derivedId`'s layout of a parts hash. */
const uuidOf = (h: string): string => `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`;

/**
 * A stable UUID-shaped id from its parts: the same parts give the same id, so
 * an effect that is handled again (a retry, a restart) is the same event,
 * which the store then ignores.
 */
export const derivedId = (...parts: string[]): string => uuidOf(hashOf(parts));

/** A stable 24-hex resource id from its parts (a command a rule's action requests). */
export const derivedResourceId = (...parts: string[]): string => hashOf(parts).slice(0, 24);

/** An id made by `newEventId`, or by `causedId` from one: its first 48 bits are a time. */
const isTimeOrdered = (id: string) => id.length === 36 && (id[14] === '7' || id[14] === '8');

/**
 * The id of an event caused by the event `cause`, derived from `parts`
 * (which include the cause) as `derivedId` derives it, so a retry makes the
 * same id. When the cause's id is time-ordered, so is this one: it keeps the
 * cause's 48 bits of time, then version 8 (a layout of one's own, RFC 9562),
 * then the parts' hash, so a rule's run or a calculation's result lands in
 * the log's index beside its cause instead of on a random page.
 *
 * Which form an id takes follows its cause alone: a cause stored before
 * time-ordered ids existed has a random id, and its effects keep the ids they
 * had then, however often the batch is handled again.
 */
export function causedId(cause: string, parts: string[]): string {
  const h = hashOf(parts);
  return isTimeOrdered(cause) ? `${cause.slice(0, 13)}-8${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}` : uuidOf(h);
}

export const RESOURCE_ID = /^[0-9a-f]{24}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isResourceId = (s: unknown): s is string => typeof s === 'string' && RESOURCE_ID.test(s);
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID.test(s);
