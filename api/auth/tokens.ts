import { createSecretKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';

/** Tokens are HS256 only: verification pins the algorithm, so `none` and key-confusion tokens fail. */
const ALGORITHM = 'HS256' as const;
const ISSUER = 'device-platform';

export function issueToken(secret: string, userId: string, ttlSeconds: number): string {
  return jwt.sign({}, secret, { algorithm: ALGORITHM, subject: userId, expiresIn: ttlSeconds, issuer: ISSUER });
}

// Given a string, jsonwebtoken first tries to parse it as a PEM public key on every call, which
// costs more than the whole HMAC check; a secret KeyObject, made once, skips that.
const keys = new Map<string, KeyObject>();
const keyOf = (secret: string): KeyObject => {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = createSecretKey(Buffer.from(secret, 'utf8'))));
  return key;
};

/** The user id in a valid, unexpired token; null for anything else. */
export function verifyToken(secret: string, token: string): string | null {
  try {
    const claims = jwt.verify(token, keyOf(secret), { algorithms: [ALGORITHM], issuer: ISSUER });
    return typeof claims === 'object' && typeof claims.sub === 'string' ? claims.sub : null;
  } catch {
    return null;
  }
}
