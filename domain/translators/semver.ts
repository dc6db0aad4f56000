/**
 * Semantic versions (semver.org 2.0.0): parsing, precedence, and what an
 * upgrade policy lets a device move to.
 */
export interface SemVer {
  major: number;
  minor: number;
  patch: number;
  /** Pre-release identifiers, e.g. `['beta', 2]`; empty for a release. */
  pre: (string | number)[];
  text: string;
}

// The official pattern from semver.org, without build-metadata capture (build metadata never changes precedence).
export const SEMVER_PATTERN =
  '^(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\\+[0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*)?$';
const SEMVER = new RegExp(SEMVER_PATTERN);

export function parseSemver(text: string): SemVer | null {
  const m = SEMVER.exec(text);
  if (!m) return null;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (![major, minor, patch].every(Number.isSafeInteger)) return null;
  const pre = m[4] ? m[4].split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p)) : [];
  return { major, minor, patch, pre, text };
}

/** Precedence: negative when `a` is older than `b`, 0 when equal (build metadata ignored). */
export function compareSemver(a: SemVer, b: SemVer): number {
  if (a.major !== b.major) return a.major - b.major;
  if (a.minor !== b.minor) return a.minor - b.minor;
  if (a.patch !== b.patch) return a.patch - b.patch;
  // A release outranks its pre-releases.
  if (a.pre.length === 0 || b.pre.length === 0) return b.pre.length - a.pre.length;
  for (let i = 0; i < Math.max(a.pre.length, b.pre.length); i++) {
    const x = a.pre[i];
    const y = b.pre[i];
    if (x === undefined) return -1;
    if (y === undefined) return 1;
    if (x === y) continue;
    if (typeof x === 'number' && typeof y === 'number') return x - y;
    if (typeof x === 'number') return -1;
    if (typeof y === 'number') return 1;
    return x < y ? -1 : 1;
  }
  return 0;
}

export const UPGRADE_POLICIES = ['none', 'patch', 'minor', 'all'] as const;
export type UpgradePolicy = (typeof UPGRADE_POLICIES)[number];

/**
 * Whether a device that asked for `wanted` under `policy` may run `candidate`:
 * `none` exactly that version; `patch` the same major.minor; `minor` the same
 * major; `all` anything. Never an older version than the one asked for, and
 * pre-releases only when asked for exactly.
 */
export function policyAllows(policy: UpgradePolicy, wanted: SemVer, candidate: SemVer): boolean {
  const order = compareSemver(candidate, wanted);
  if (order === 0) return true;
  if (order < 0 || candidate.pre.length > 0) return false;
  switch (policy) {
    case 'none':
      return false;
    case 'patch':
      return candidate.major === wanted.major && candidate.minor === wanted.minor;
    case 'minor':
      return candidate.major === wanted.major;
    case 'all':
      return true;
    default: {
      const _: never = policy;
      return _;
    }
  }
}
