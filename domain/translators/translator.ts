import type { Decider } from '../shared/decider.js';
import { ConflictError, NotFoundError, ValidationError } from '../shared/errors.js';
import { checkSpec, createResultCheck, isTranslatorError, type FieldSpec, type FieldType, type TranslatorSpec } from '../../sandbox/index.js';
import { compareSemver, parseSemver, type SemVer } from './semver.js';

/**
 * Translators: uploaded code that decodes raw uplinks (the first translator of
 * a device, its hardware decoder) or derives further fields (chained
 * translators). A translator version is immutable once uploaded; a new
 * version is a new upload. All versions of one name share a stream, so the
 * name+version uniqueness and the versioning rule are decided against every
 * version uploaded before, never against a lagging read model.
 *
 * Translators are a platform-wide catalogue: every caller whose role allows
 * GET on `translator` reads all of them; uploading and deleting is governed by
 * the role check alone (POST and DELETE on `translator`, admins by default).
 */
export interface ParameterSpec {
  type: FieldType;
  description: string;
  default?: unknown;
  optional?: boolean;
}

export interface TranslatorFields {
  name: string;
  version: string;
  apiVersion: string;
  description: string;
  /** e.g. `{deviceModelName: 'acme-th-01'}`: devices without preferences whose `deviceModelName` equals it use this translator. */
  match: Record<string, unknown> & { deviceModelName?: string };
  parameters: Record<string, ParameterSpec>;
  spec: TranslatorSpec;
  code: string;
}

export type TranslatorDoc = TranslatorFields & { id: string; createdBy: string; at: string };

export type TranslatorEvent =
  | { type: 'TranslatorUploaded'; data: TranslatorDoc }
  | { type: 'TranslatorDeleted'; data: { id: string; name: string; version: string; at: string } };

export type TranslatorCommand =
  | { type: 'UploadTranslator'; id: string; createdBy: string; fields: TranslatorFields; at: string }
  | { type: 'DeleteTranslator'; id: string; name: string; at: string };

interface Version {
  id: string;
  version: SemVer;
  spec: TranslatorSpec;
}

export type TranslatorState = { versions: Version[] };

export const translatorStream = (name: string) => `translator-name-${name}`;
export const TRANSLATOR_NOT_FOUND = 'Translator not found';

/** Code above this size is refused with 413 (UTF-8 bytes), matching the sandbox's own cap. */
export { MAX_CODE_BYTES } from '../../sandbox/index.js';

/** One difference in the data model between two specs. */
export interface SpecChange {
  field: string;
  why: string;
}

interface Normal {
  type: string;
  unit: string | null;
  quantity: string | null;
}

const LOWER_CAMEL = /^[a-z][a-zA-Z0-9]{0,63}$/;

const normal = (entry: FieldSpec): Normal =>
  typeof entry === 'string' ? { type: entry, unit: null, quantity: null } : { type: entry.type, unit: entry.unit, quantity: entry.quantity };
const showUnit = (unit: string | null) => (unit === null ? 'none' : `'${unit}'`);

/**
 * The data-model changes from `before` to `after`: a field added, removed
 * (a rename is a removal plus an addition), or its type, unit or quantity
 * (its meaning) changed. Empty when the data model is the same.
 */
export function specChanges(before: TranslatorSpec, after: TranslatorSpec): SpecChange[] {
  const changes: SpecChange[] = [];
  for (const field of Object.keys(before)) {
    if (!Object.hasOwn(after, field)) changes.push({ field, why: 'was removed or renamed' });
  }
  for (const [field, entry] of Object.entries(after)) {
    if (!Object.hasOwn(before, field)) {
      changes.push({ field, why: 'was added' });
      continue;
    }
    const [a, b] = [normal(before[field]!), normal(entry)];
    if (a.type !== b.type) changes.push({ field, why: `changed its type from ${a.type} to ${b.type}` });
    if (a.unit !== b.unit) changes.push({ field, why: `changed its unit from ${showUnit(a.unit)} to ${showUnit(b.unit)}` });
    if (a.quantity !== b.quantity && a.unit !== null && b.unit !== null) {
      changes.push({ field, why: `changed its quantity (meaning) from ${a.quantity} to ${b.quantity}` });
    }
  }
  return changes;
}

/**
 * The rules of an upload that need no other version: the spec (types, SI
 * units, flat lowerCamelCase names) and the parameters' defaults. Shape and
 * patterns were checked against the OpenAPI document before.
 */
export function checkFields(fields: TranslatorFields): void {
  const issue = checkSpec(fields.spec)[0];
  if (issue) throw ValidationError.field(issue.field ? `spec.${issue.field}` : 'spec', issue.problem);
  for (const [name, parameter] of Object.entries(fields.parameters)) {
    if (!LOWER_CAMEL.test(name)) throw ValidationError.field(`parameters.${name}`, 'is not a flat lowerCamelCase name');
    if (parameter.default === undefined) continue;
    try {
      createResultCheck({ [name]: parameter.type })({ result: { [name]: parameter.default } }, [], []);
    } catch (error) {
      if (!isTranslatorError(error)) throw error;
      throw ValidationError.field(`parameters.${name}.default`, `does not match its type ${parameter.type}: ${error.message.replace(/^[^:]*: /, '')}`);
    }
  }
}

/** The parameters a translator is called with when a preference gives none: every declared default. */
export function defaultParameters(parameters: Record<string, ParameterSpec>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, p] of Object.entries(parameters)) if (p.default !== undefined) out[name] = p.default;
  return out;
}

function versionOf(text: string): SemVer {
  const version = parseSemver(text);
  if (!version) throw ValidationError.field('version', 'must be a semantic version such as 1.0.0');
  return version;
}

/**
 * The versioning rule: the major version is raised if and only if the data
 * model changes. A version is checked against both its neighbours, since a
 * version can be uploaded below one that exists (a late patch of an older
 * line, or an older release uploaded after a newer one):
 * - against the highest version below it, as a release following that one;
 * - against the lowest version above it, as the release that one follows:
 *   with the same major version its spec must be identical, with a higher
 *   major version it must differ.
 */
function checkVersioning(state: TranslatorState, version: SemVer, spec: TranslatorSpec): void {
  let previous: Version | undefined;
  let next: Version | undefined;
  for (const v of state.versions) {
    const order = compareSemver(v.version, version);
    if (order < 0 && (!previous || compareSemver(v.version, previous.version) > 0)) previous = v;
    if (order > 0 && (!next || compareSemver(v.version, next.version) < 0)) next = v;
  }
  if (previous) {
    const majorRaised = version.major > previous.version.major;
    const first = specChanges(previous.spec, spec)[0];
    if (first && !majorRaised) {
      throw ValidationError.field(
        `spec.${first.field}`,
        `${first.why} compared to version ${previous.version.text}, which changes the data model: raise the major version (upload it as ${previous.version.major + 1}.0.0)`,
      );
    }
    if (!first && majorRaised) {
      throw ValidationError.field(
        'version',
        `raises the major version over ${previous.version.text} but the spec is unchanged: raise the major version only when the data model changes (upload it as ${previous.version.major}.${previous.version.minor + 1}.0)`,
      );
    }
  }
  if (next) {
    const majorRaised = next.version.major > version.major;
    const first = specChanges(next.spec, spec)[0];
    if (first && !majorRaised) {
      throw ValidationError.field(
        `spec.${first.field}`,
        `${first.why} compared to version ${next.version.text}, a later version of the same major version: versions that share a major version share one data model`,
      );
    }
    if (!first && majorRaised) {
      throw ValidationError.field(
        'version',
        `is below ${next.version.text}, which raises the major version over it, but has the same spec: the major version is raised only when the data model changes (upload it as a ${next.version.major}.x version)`,
      );
    }
  }
}

export const translatorDecider: Decider<TranslatorCommand, TranslatorState, TranslatorEvent> = {
  initialState: () => ({ versions: [] }),
  decide(command, state) {
    switch (command.type) {
      case 'UploadTranslator': {
        const { fields } = command;
        const version = versionOf(fields.version);
        checkFields(fields);
        const taken = state.versions.find((v) => compareSemver(v.version, version) === 0);
        if (taken) throw new ConflictError(`ERR - version ${taken.version.text} of translator ${fields.name} already exists`);
        checkVersioning(state, version, fields.spec);
        return [{ type: 'TranslatorUploaded', data: { ...fields, id: command.id, createdBy: command.createdBy, at: command.at } }];
      }
      case 'DeleteTranslator': {
        const found = state.versions.find((v) => v.id === command.id);
        if (!found) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
        return [{ type: 'TranslatorDeleted', data: { id: command.id, name: command.name, version: found.version.text, at: command.at } }];
      }
      default: {
        const _: never = command;
        return _;
      }
    }
  },
  evolve(state, event) {
    switch (event.type) {
      case 'TranslatorUploaded':
        return { versions: [...state.versions, { id: event.data.id, version: versionOf(event.data.version), spec: event.data.spec }] };
      case 'TranslatorDeleted':
        return { versions: state.versions.filter((v) => v.id !== event.data.id) };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
