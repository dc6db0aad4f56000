import type { Decider } from '../shared/decider.js';
import type { EventSchemas } from '../eventstore/schemas.js';
import { ConflictError, NotFoundError, ValidationError, type Problem } from '../shared/errors.js';
import { PROTECTED_FROM_REPORTS, SYSTEM_FIELDS } from '../devices/device.js';
import {
  MAX_EXAMPLES,
  checkFieldMap,
  checkSpec,
  contentProblem,
  createResultCheck,
  declaredType,
  exampleInputProblem,
  isTranslatorError,
  type Example,
  type ExampleResult,
  type FieldMap,
  type FieldSpec,
  type FieldType,
  type TranslatorSpec,
  type UnmappedPolicy,
} from '../../sandbox/index.js';
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
  /** Brings a device-repository codec's `data` under the spec (see sandbox/fieldMap.ts); `{}` for none. */
  fieldMap: FieldMap;
  /** Codec data neither mapped nor in the spec: `reject` the translation (default) or `drop` it. */
  unmapped: UnmappedPolicy;
  /** Uplinks with the output they must give; run at upload. */
  examples: Example[];
}

/** An example as stored: with how it came out when its version was uploaded. */
export type StoredExample = Example & { lastResult: ExampleResult };

export type TranslatorDoc = Omit<TranslatorFields, 'examples'> & { examples: StoredExample[]; id: string; createdBy: string; at: string };

export type TranslatorEvent =
  | { type: 'TranslatorUploaded'; data: TranslatorDoc }
  | { type: 'TranslatorDeleted'; data: { id: string; name: string; version: string; at: string } };

/**
 * Schema versions of translator events (see `domain/eventstore/schemas.ts`).
 * `TranslatorUploaded` 2 always carries `fieldMap`, `unmapped` and
 * `examples`; versions uploaded before field maps and examples existed
 * (version 1) upcast to none of them: an empty map, `reject`, no examples.
 */
export const translatorSchemas: EventSchemas = {
  TranslatorUploaded: {
    version: 2,
    upcast: { 1: (data) => ({ ...data, fieldMap: data.fieldMap ?? {}, unmapped: data.unmapped ?? 'reject', examples: data.examples ?? [] }) },
  },
};

export type TranslatorCommand =
  /** `exampleResults`: each of `fields.examples` run in the sandbox, in order; all passed. */
  | { type: 'UploadTranslator'; id: string; createdBy: string; fields: TranslatorFields; exampleResults: ExampleResult[]; at: string }
  | { type: 'DeleteTranslator'; id: string; name: string; at: string };

interface Version {
  id: string;
  version: SemVer;
  spec: TranslatorSpec;
  fieldMap: FieldMap;
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

/** The conversion a field map applies to each field it gives; fields without an entry are absent. */
function scalings(fieldMap: FieldMap): Map<string, { scale: number; offset: number }> {
  const out = new Map<string, { scale: number; offset: number }>();
  for (const entry of Object.values(fieldMap)) out.set(entry.field, { scale: entry.scale ?? 1, offset: entry.offset ?? 0 });
  return out;
}

const showScaling = (s: { scale: number; offset: number }) => `×${s.scale}${s.offset === 0 ? '' : ` ${s.offset < 0 ? '−' : '+'} ${Math.abs(s.offset)}`}`;

/**
 * The data-model changes from `before` to `after`: a field added, removed
 * (a rename is a removal plus an addition), or its type, unit, quantity (its
 * meaning) or, where both versions map it from a codec, its scaling changed.
 * Empty when the data model is the same.
 */
export function specChanges(before: TranslatorSpec, after: TranslatorSpec, beforeMap: FieldMap = {}, afterMap: FieldMap = {}): SpecChange[] {
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
  const [was, is] = [scalings(beforeMap), scalings(afterMap)];
  for (const [field, scaling] of is) {
    const old = was.get(field);
    if (old && Object.hasOwn(before, field) && (old.scale !== scaling.scale || old.offset !== scaling.offset)) {
      changes.push({ field, why: `changed its scaling from ${showScaling(old)} to ${showScaling(scaling)}` });
    }
  }
  return changes;
}

/** Why the platform never stores a field from a translator; undefined for a name it stores. */
export function reservedReason(field: string): string | undefined {
  if (SYSTEM_FIELDS.has(field)) return 'is set by the platform itself, so ingest never stores it from a translator';
  if (PROTECTED_FROM_REPORTS.has(field)) return 'identifies the device or belongs to the platform, so ingest never stores it from a translator';
  return undefined;
}

/**
 * The rules of an upload that need no other version and no sandbox: the
 * spec (types, SI units, flat lowerCamelCase names, no name ingest would not
 * store), the parameters' defaults, the field map against the spec, and the
 * examples' inputs. Shape and patterns were checked against the OpenAPI
 * document before. Every problem found is reported at once.
 */
export function checkFields(fields: TranslatorFields): void {
  const problems: Problem[] = [];
  for (const name of Object.keys(fields.spec)) {
    const reason = reservedReason(name);
    if (reason) problems.push({ field: `spec.${name}`, problem: reason });
  }
  for (const issue of checkSpec(fields.spec)) {
    if (!reservedReason(issue.field)) problems.push({ field: issue.field ? `spec.${issue.field}` : 'spec', problem: issue.problem });
  }
  const lnglat = fields.spec.lnglat;
  if (lnglat !== undefined && typeof lnglat !== 'object' && lnglat !== 'geoJsonPoint') {
    problems.push({ field: 'spec.lnglat', problem: 'must be a geoJsonPoint: ingest stores lnglat only as a GeoJSON point' });
  }
  for (const [name, parameter] of Object.entries(fields.parameters)) {
    if (!LOWER_CAMEL.test(name)) {
      problems.push({ field: `parameters.${name}`, problem: 'is not a flat lowerCamelCase name' });
      continue;
    }
    if (parameter.default === undefined) continue;
    try {
      createResultCheck({ [name]: parameter.type })({ result: { [name]: parameter.default } }, [], []);
    } catch (error) {
      if (!isTranslatorError(error)) throw error;
      problems.push({ field: `parameters.${name}.default`, problem: `does not match its type ${parameter.type}: ${error.message.replace(/^[^:]*: /, '')}` });
    }
  }
  problems.push(...checkFieldMap(fields.fieldMap, fields.spec, reservedReason));
  if (fields.examples.length > MAX_EXAMPLES) problems.push({ field: 'examples', problem: `has ${fields.examples.length} examples, more than ${MAX_EXAMPLES}` });
  fields.examples.forEach((example, i) => {
    const input = exampleInputProblem(example.input);
    if (input) problems.push({ field: `examples[${i}].${input.field}`, problem: input.problem });
    // Examples are stored as they come: the same rules as any stored value.
    const content = contentProblem(example.output, `examples[${i}].output`, 1) ?? contentProblem(example.errors, `examples[${i}].errors`, 1) ?? contentProblem(example.description, `examples[${i}].description`, 1);
    if (content) problems.push({ field: `examples[${i}]`, problem: content });
    if ((example.output === undefined) === (example.errors === undefined)) {
      problems.push({ field: `examples[${i}]`, problem: 'needs either output (the expected result) or errors (the expected codec errors)' });
    }
  });
  const [first, ...rest] = problems;
  if (first) throw ValidationError.all([first, ...rest]);
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
function checkVersioning(state: TranslatorState, version: SemVer, spec: TranslatorSpec, fieldMap: FieldMap): void {
  let previous: Version | undefined;
  let next: Version | undefined;
  for (const v of state.versions) {
    const order = compareSemver(v.version, version);
    if (order < 0 && (!previous || compareSemver(v.version, previous.version) > 0)) previous = v;
    if (order > 0 && (!next || compareSemver(v.version, next.version) < 0)) next = v;
  }
  const problems: Problem[] = [];
  if (previous) {
    const majorRaised = version.major > previous.version.major;
    const changes = specChanges(previous.spec, spec, previous.fieldMap, fieldMap);
    if (changes.length > 0 && !majorRaised) {
      const advice = `which changes the data model: raise the major version (upload it as ${previous.version.major + 1}.0.0)`;
      for (const c of changes) problems.push({ field: `spec.${c.field}`, problem: `${c.why} compared to version ${previous.version.text}, ${advice}` });
    }
    if (changes.length === 0 && majorRaised) {
      problems.push({
        field: 'version',
        problem: `raises the major version over ${previous.version.text} but the spec is unchanged: raise the major version only when the data model changes (upload it as ${previous.version.major}.${previous.version.minor + 1}.0)`,
      });
    }
  }
  if (next) {
    const majorRaised = next.version.major > version.major;
    const changes = specChanges(next.spec, spec, next.fieldMap, fieldMap);
    if (changes.length > 0 && !majorRaised) {
      for (const c of changes) {
        problems.push({ field: `spec.${c.field}`, problem: `${c.why} compared to version ${next.version.text}, a later version of the same major version: versions that share a major version share one data model` });
      }
    }
    if (changes.length === 0 && majorRaised) {
      problems.push({
        field: 'version',
        problem: `is below ${next.version.text}, which raises the major version over it, but has the same spec: the major version is raised only when the data model changes (upload it as a ${next.version.major}.x version)`,
      });
    }
  }
  const [first, ...rest] = problems;
  if (first) throw ValidationError.all([first, ...rest]);
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
        checkVersioning(state, version, fields.spec, fields.fieldMap);
        const failed = command.exampleResults.findIndex((r) => !r.passed);
        if (command.exampleResults.length !== fields.examples.length || failed >= 0) {
          throw ValidationError.field(failed >= 0 ? `examples[${failed}]` : 'examples', 'did not pass in the sandbox');
        }
        const examples = fields.examples.map((example, i): StoredExample => ({ ...example, lastResult: command.exampleResults[i]! }));
        return [{ type: 'TranslatorUploaded', data: { ...fields, examples, id: command.id, createdBy: command.createdBy, at: command.at } }];
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
        return { versions: [...state.versions, { id: event.data.id, version: versionOf(event.data.version), spec: event.data.spec, fieldMap: event.data.fieldMap }] };
      case 'TranslatorDeleted':
        return { versions: state.versions.filter((v) => v.id !== event.data.id) };
      default: {
        const _: never = event;
        return _;
      }
    }
  },
};
