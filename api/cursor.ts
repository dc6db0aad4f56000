import { createHmac, timingSafeEqual } from 'node:crypto';
import { BadRequestError } from '../domain/shared/errors.js';

/**
 * Paging cursors the API hands out and takes back: the position as JSON,
 * signed with a key derived from the token secret, so a client can neither
 * forge nor alter one. A cursor that was not issued here, or was altered, is
 * 400 before it reaches a query.
 */
export interface Cursors {
  seal(position: unknown): string;
  /** The position, checked by `valid`; `BadRequestError` otherwise. */
  open<T>(text: string, valid: (value: unknown) => value is T): T;
}

export function cursors(secret: string, purpose: string): Cursors {
  const key = createHmac('sha256', secret).update(`cursor:${purpose}`).digest();
  const mac = (body: string) => createHmac('sha256', key).update(body).digest().subarray(0, 16);
  const refused = () => new BadRequestError('ERR - cursor is not a cursor this API returned; start again without it');
  return {
    seal(position) {
      const body = Buffer.from(JSON.stringify(position)).toString('base64url');
      return `${body}.${mac(body).toString('base64url')}`;
    },
    open(text, valid) {
      const [body, tag, ...rest] = text.split('.');
      if (!body || !tag || rest.length) throw refused();
      const given = Buffer.from(tag, 'base64url');
      const expected = mac(body);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refused();
      let value: unknown;
      try {
        value = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
      } catch {
        throw refused();
      }
      if (!valid(value)) throw refused();
      return value;
    },
  };
}
