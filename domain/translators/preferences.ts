import { compareSemver, parseSemver, policyAllows, type SemVer, type UpgradePolicy } from './semver.js';

/**
 * A device's `translatorPreferences`: the translators it runs, in order. The
 * first is its hardware decoder (called with the raw uplink); the rest are
 * chained translators (called with the device after the earlier ones).
 * `userId`, when given, limits the candidates to versions that user uploaded.
 * `parameters` override the translator's declared defaults.
 */
export interface TranslatorPreference {
  name: string;
  userId?: string;
  version: string;
  upgradePolicy: UpgradePolicy;
  parameters?: Record<string, unknown>;
}

/** An uploaded translator version, as resolution sees it. */
export interface Candidate {
  id: string;
  name: string;
  version: SemVer;
  createdBy: string;
  deviceModelName: string | null;
}

const newer = (a: Candidate, b: Candidate | undefined) => !b || compareSemver(a.version, b.version) > 0;

/** The newest uploaded version of the preference's name that its policy allows; undefined when none is uploaded (yet). */
export function resolvePreference(preference: TranslatorPreference, versions: Iterable<Candidate>): Candidate | undefined {
  const wanted = parseSemver(preference.version);
  if (!wanted) return undefined;
  let best: Candidate | undefined;
  for (const c of versions) {
    if (c.name !== preference.name) continue;
    if (preference.userId !== undefined && c.createdBy !== preference.userId) continue;
    if (policyAllows(preference.upgradePolicy, wanted, c.version) && newer(c, best)) best = c;
  }
  return best;
}

/**
 * For a device without preferences: the translator whose `match.deviceModelName`
 * is the device's model name, in its highest release version; pre-releases
 * are never picked this way.
 */
export function resolveModel(deviceModelName: string, candidates: Iterable<Candidate>): Candidate | undefined {
  let best: Candidate | undefined;
  for (const c of candidates) {
    if (c.deviceModelName === deviceModelName && c.version.pre.length === 0 && newer(c, best)) best = c;
  }
  return best;
}

/** The preferences a device document holds, or null when it has none (or not a list). */
export function preferencesOf(value: unknown): TranslatorPreference[] | null {
  if (!Array.isArray(value) || value.length === 0) return null;
  const list = value.filter(
    (p): p is TranslatorPreference =>
      typeof p === 'object' && p !== null && typeof p.name === 'string' && typeof p.version === 'string' && typeof p.upgradePolicy === 'string',
  );
  return list.length ? list : null;
}
