import { randomBytes, randomUUID } from 'node:crypto';

/** Resources get 24-character hexadecimal ids. */
export const newResourceId = (): string => randomBytes(12).toString('hex');

/** Users get UUIDs, as an identity provider gives them. */
export const newUserId = (): string => randomUUID();

export const RESOURCE_ID = /^[0-9a-f]{24}$/;
export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isResourceId = (s: unknown): s is string => typeof s === 'string' && RESOURCE_ID.test(s);
export const isUuid = (s: unknown): s is string => typeof s === 'string' && UUID.test(s);
