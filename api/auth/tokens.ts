import jwt from 'jsonwebtoken';

/** Tokens are HS256 only: verification pins the algorithm, so `none` and key-confusion tokens fail. */
const ALGORITHM = 'HS256' as const;
const ISSUER = 'device-platform';

export function issueToken(secret: string, userId: string, ttlSeconds: number): string {
  return jwt.sign({}, secret, { algorithm: ALGORITHM, subject: userId, expiresIn: ttlSeconds, issuer: ISSUER });
}

/** The user id in a valid, unexpired token; null for anything else. */
export function verifyToken(secret: string, token: string): string | null {
  try {
    const claims = jwt.verify(token, secret, { algorithms: [ALGORITHM], issuer: ISSUER });
    return typeof claims === 'object' && typeof claims.sub === 'string' ? claims.sub : null;
  } catch {
    return null;
  }
}
