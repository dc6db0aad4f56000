import { randomBytes, scrypt, timingSafeEqual, type BinaryLike } from 'node:crypto';

const scryptAsync = (password: BinaryLike, salt: BinaryLike, keylen: number) =>
  new Promise<Buffer>((resolve, reject) => scrypt(password, salt, keylen, { N: 16384, r: 8, p: 1 }, (e, key) => (e ? reject(e) : resolve(key))));

/** `scrypt$<salt hex>$<key hex>`; salted per password. */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scryptAsync(password, salt, 32);
  return `scrypt$${salt.toString('hex')}$${key.toString('hex')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, salt, key] = stored.split('$');
  if (scheme !== 'scrypt' || !salt || !key) return false;
  const expected = Buffer.from(key, 'hex');
  const actual = await scryptAsync(password, Buffer.from(salt, 'hex'), expected.length);
  return timingSafeEqual(actual, expected);
}

/** A one-time password handed to a user created or reset by an administrator. */
export const temporaryPassword = (): string => randomBytes(12).toString('base64url');
