import { createSecretKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';

/** Tokens are HS256 only: verification pins the algorithm, so `none` and key-confusion tokens fail. */
const ALGORITHM = 'HS256' as const;
const ISSUER = 'device-platform';

/** What a valid, unexpired token says. */
export interface TokenClaims {
  /** The user the token speaks for (`sub`). */
  userId: string;
  /**
   * The user's token version when it was issued (`ver`): the number of their
   * password changes and resets by then. A token without it (issued before
   * tokens carried one) is of version 0.
   */
  version: number;
  /** When it expires (`exp`), in milliseconds since the epoch. */
  expiresAt: number;
}

/** A token for `userId` at their current token version (`users.token_version`). */
export function issueToken(secret: string, userId: string, ttlSeconds: number, version = 0): string {
  return jwt.sign({ ver: version }, secret, { algorithm: ALGORITHM, subject: userId, expiresIn: ttlSeconds, issuer: ISSUER });
}

// Given a string, jsonwebtoken first tries to parse it as a PEM public key on every call, which
// costs more than the whole HMAC check; a secret KeyObject, made once, skips that.
const keys = new Map<string, KeyObject>();
const keyOf = (secret: string): KeyObject => {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = createSecretKey(Buffer.from(secret, 'utf8'))));
  return key;
};

/**
 * The claims of a valid, unexpired token; null for anything else. Whether the
 * user still exists, is enabled and is at the token's version is for the
 * caller to check against the users read model.
 */
export function verifyToken(secret: string, token: string): TokenClaims | null {
  try {
    const claims = jwt.verify(token, keyOf(secret), { algorithms: [ALGORITHM], issuer: ISSUER });
    if (typeof claims !== 'object' || typeof claims.sub !== 'string' || typeof claims.exp !== 'number') return null;
    const version = claims.ver === undefined ? 0 : claims.ver;
    if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 0) return null;
    return { userId: claims.sub, version, expiresAt: claims.exp * 1000 };
  } catch {
    return null;
  }
}
