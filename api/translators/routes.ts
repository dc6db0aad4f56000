import { sql } from 'kysely';
import { Router } from 'express';
import { parseDocument as parseYamlDocument } from 'yaml';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { ConflictError, NotFoundError, PayloadTooLargeError, TooManyRequestsError, ValidationError, type Problem } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import {
  MAX_CODE_BYTES,
  TRANSLATOR_NOT_FOUND,
  checkFields,
  defaultParameters,
  translatorDecider,
  translatorStream,
  type TranslatorDoc,
  type TranslatorEvent,
  type TranslatorFields,
} from '../../domain/translators/translator.js';
import type { RecordedEvent } from '../../domain/shared/events.js';
import { revisions, streamEvents } from '../../domain/audit/history.js';
import { downlinkExamples, proposeTranslator, uplinkExamples, type ReviewNote } from '../../domain/translators/proposal.js';
import { parseSemver } from '../../domain/translators/semver.js';
import { exampleInputProblem, exampleUplink, firstDifference, isTranslatorError, MAX_EXAMPLES, type Entries, type ExampleInput, type Sandbox, type Strike, type TimeoutBudget } from '../../sandbox/index.js';
import type { TranslatorsTable } from '../../projections/translators.js';
import type { Translation } from '../../ingest/translate.js';
import { readableBy } from '../access.js';
import { principalOf } from '../http.js';

type Body = Partial<TranslatorFields> & Pick<TranslatorFields, 'name' | 'version' | 'spec' | 'code'>;

interface ImportBody {
  code: string;
  codecYaml?: string;
  deviceYaml?: string;
  name?: string;
  version?: string;
}

const present = (row: TranslatorsTable, one: boolean) => ({
  _id: row.id,
  name: row.name,
  version: row.version,
  apiVersion: row.api_version,
  description: row.description,
  match: row.match,
  parameters: row.parameters,
  spec: row.spec,
  fieldMap: row.field_map,
  unmapped: row.unmapped,
  ...(one ? { examples: row.examples, code: row.code } : {}),
  createdBy: row.created_by,
  createdAt: row.created_at.toISOString(),
});

/** An uploaded version as the read model would hold it, for showing it as `GET` does. */
const rowOf = (d: TranslatorDoc): TranslatorsTable => {
  const v = parseSemver(d.version);
  return {
    id: d.id,
    name: d.name,
    version: d.version,
    major: v?.major ?? 0,
    minor: v?.minor ?? 0,
    patch: v?.patch ?? 0,
    prerelease: (v?.pre.length ?? 0) > 0,
    api_version: d.apiVersion,
    description: d.description,
    match: d.match,
    device_model_name: typeof d.match.deviceModelName === 'string' ? d.match.deviceModelName : null,
    parameters: d.parameters,
    spec: d.spec,
    code: d.code,
    field_map: d.fieldMap,
    unmapped: d.unmapped,
    examples: d.examples,
    created_by: d.createdBy,
    created_at: new Date(d.at),
  };
};

function checkSize(code: string): void {
  if (Buffer.byteLength(code, 'utf8') > MAX_CODE_BYTES) {
    throw new PayloadTooLargeError(`ERR - code is larger than ${MAX_CODE_BYTES} bytes (256 KiB)`);
  }
}

/** Runs a sandbox check, turning what the code did wrong into a 422 on `code`. */
async function codeCheck<T>(budget: TimeoutBudget, payer: string, run: (strike: Strike) => Promise<T>): Promise<T> {
  // Code that loops holds the whole platform for its deadline: a user whose translators keep doing so waits (sandbox/budget.ts).
  const blocked = budget.blockedUntil(payer);
  if (blocked) {
    const wait = Math.max(1, Math.ceil((blocked - Date.now()) / 1000));
    throw new TooManyRequestsError(`ERR - too many translator time-outs: your translators ran into their deadline, or cost a sandbox context, ${budget.limit} times within ${budget.windowMs / 1000} s; try again in ${wait} s`, wait);
  }
  try {
    return await run(() => budget.charge(payer) === 0);
  } catch (error) {
    if (!isTranslatorError(error)) throw error;
    if (error.kind === 'timeout' || error.discarded) budget.charge(payer);
    // The sandbox's message already ends with the line and column.
    throw ValidationError.field('code', error.message);
  }
}

/** Nesting a device-repository YAML file may have (its examples' data deeper than 32 levels is left out of a proposal, with a note). */
const MAX_YAML_DEPTH = 256;
const MAX_YAML_ALIASES = 100;

/**
 * A device-repository YAML file, read as the plain data it is: the core
 * schema (no `!!binary`, `!!set`, `!!timestamp` or other tags that would make
 * a Buffer, a Set or a Date), at most 100 aliases, and no alias inside its
 * own anchor (`&d {self: *d}` would make data that refers to itself).
 */
function parseYamlField(field: string, text: string | undefined): unknown {
  if (text === undefined) return undefined;
  const invalid = (why: string) => ValidationError.field(field, `is not valid YAML: ${why.split('\n')[0]}`);
  let value: unknown;
  try {
    // resolveKnownTags: false, or !!binary, !!set and !!timestamp are resolved whatever the schema.
    const document = parseYamlDocument(text, { schema: 'core', resolveKnownTags: false, merge: false, uniqueKeys: true, logLevel: 'silent', prettyErrors: false });
    const problem = document.errors[0] ?? document.warnings[0];
    if (problem) {
      const tag = /^Unresolved tag: (.*)$/.exec(problem.message);
      throw tag ? ValidationError.field(field, `uses the tag ${tag[1]!.replace(/^tag:yaml\.org,2002:/, '!!')}: only plain data is read (maps, lists, strings, numbers, true, false, null)`) : invalid(problem.message);
    }
    value = document.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    if (error instanceof ValidationError) throw error;
    throw invalid((error as Error).message);
  }
  const problem = plainDataProblem(value);
  if (problem) throw ValidationError.field(field, problem);
  return value;
}

/** Why parsed YAML is not plain JSON data: a value that refers to itself, nesting too deep, a number JSON cannot hold, an object of another kind. */
function plainDataProblem(value: unknown, depth = 0, ancestors: object[] = []): string | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : `holds ${value}, which is not a finite number`;
  if (value === null || typeof value !== 'object') return undefined;
  const prototype = Object.getPrototypeOf(value) as unknown;
  if (prototype !== Object.prototype && prototype !== Array.prototype && prototype !== null) return 'holds a value that is not plain data';
  if (ancestors.includes(value)) return 'refers to itself: an alias is used inside its own anchor';
  if (depth >= MAX_YAML_DEPTH) return `nests deeper than ${MAX_YAML_DEPTH} levels`;
  ancestors.push(value);
  try {
    for (const item of Array.isArray(value) ? value : Object.values(value)) {
      const problem = plainDataProblem(item, depth + 1, ancestors);
      if (problem) return problem;
    }
    return undefined;
  } finally {
    ancestors.pop();
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The translator catalogue. It is shared platform-wide: reads need only the
 * role's GET on `translator`, uploads, imports and deletions its POST and
 * DELETE (admins by default); there are no per-translator access rights.
 */
export function translatorRoutes(deps: Deps, sandbox: Sandbox, translation: Translation, budget: TimeoutBudget): Router {
  const router = Router();

  router.get('/api/translators', async (req, res) => {
    // `match.deviceModelName=x` arrives as a key with a dot, `match[deviceModelName]=x` as a nested object.
    const q = req.query as { name?: string; deviceModelName?: string; 'match.deviceModelName'?: string; match?: { deviceModelName?: string } };
    let query = deps.db.selectFrom('translators').selectAll();
    if (q.name !== undefined) query = query.where('name', '=', q.name);
    for (const model of [q.deviceModelName, q['match.deviceModelName'], q.match?.deviceModelName]) {
      if (model !== undefined) query = query.where('device_model_name', '=', model);
    }
    const rows = await query.orderBy('name').orderBy('major', 'desc').orderBy('minor', 'desc').orderBy('patch', 'desc').orderBy('prerelease').orderBy('version', 'desc').execute();
    res.json(rows.map((r) => present(r, false)));
  });

  router.post('/api/translators', async (req, res) => {
    const body = req.body as Body;
    checkSize(body.code);
    const fields: TranslatorFields = {
      name: body.name,
      version: body.version,
      apiVersion: body.apiVersion ?? '1.0',
      description: body.description ?? '',
      match: body.match ?? {},
      parameters: body.parameters ?? {},
      spec: body.spec,
      code: body.code,
      fieldMap: body.fieldMap ?? {},
      unmapped: body.unmapped ?? 'reject',
      examples: body.examples ?? [],
    };
    // Cheap checks first; running code costs a fresh QuickJS context.
    if (!parseSemver(fields.version)) throw ValidationError.field('version', 'must be a semantic version such as 1.0.0');
    checkFields(fields);
    const context = requestContext(deps, req);
    const { entries, examples } = await codeCheck(budget, principalOf(req).id, (strike) =>
      sandbox.check(fields, fields.examples, { at: context.now, parameters: defaultParameters(fields.parameters), strike }),
    );
    if (entries.translate && Object.keys(fields.fieldMap).length > 0) {
      throw ValidationError.field('fieldMap', "maps the data of decodeUplink, but this code defines translate, which decodes raw uplinks instead: remove translate, or the fieldMap");
    }
    const failed: Problem[] = [];
    examples.forEach((result, i) => {
      if (result.passed) return;
      const description = fields.examples[i]!.description;
      failed.push({ field: `examples[${i}]`, problem: `${description ? `(${JSON.stringify(description)}) ` : ''}${result.problem ?? 'did not pass'}` });
    });
    const [first, ...rest] = failed;
    if (first) throw ValidationError.all([first, ...rest]);
    const id = newResourceId();
    await write(deps, context, translatorStream(fields.name), translatorDecider, { type: 'UploadTranslator', id, createdBy: context.actor, fields, exampleResults: examples, at: context.now }, { retries: 3 });
    const row = await deps.db.selectFrom('translators').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    res.status(201).json(present(row, true));
  });

  router.post('/api/translators/import', async (req, res) => {
    const body = req.body as ImportBody;
    checkSize(body.code);
    const codecYaml = parseYamlField('codecYaml', body.codecYaml);
    const deviceYaml = parseYamlField('deviceYaml', body.deviceYaml);
    if (body.codecYaml !== undefined && !isRecord(codecYaml)) throw ValidationError.field('codecYaml', 'must be a YAML mapping (uplinkDecoder: {examples: […]})');
    const now = requestContext(deps, req).now;
    const uplinks = uplinkExamples(codecYaml);
    const listed = downlinkExamples(codecYaml);
    // Each example may run for the whole deadline: as many as an upload carries, no more.
    if (uplinks.length > MAX_EXAMPLES) throw ValidationError.field('codecYaml', `has ${uplinks.length} uplink examples, more than the ${MAX_EXAMPLES} an import runs`);
    if (listed.length > MAX_EXAMPLES) throw ValidationError.field('codecYaml', `has ${listed.length} downlinkEncoder examples, more than the ${MAX_EXAMPLES} an import runs`);
    const runnable = uplinks.filter((e) => isRecord(e.input) && !exampleInputProblem(e.input as ExampleInput));
    const downlinks = listed.filter((e) => isRecord(e.input) && isRecord((e.input as { data?: unknown }).data));
    const samples = await codeCheck(budget, principalOf(req).id, (strike) =>
      sandbox.sample(
        body.code,
        {
          uplinks: runnable.map((e) => ({ encodedData: exampleUplink(e.input as ExampleInput), receivedAt: now })),
          downlinks: downlinks.map((e) => ({ data: (e.input as { data: Record<string, unknown> }).data })),
        },
        { strike },
      ),
    );
    requireCodec(samples.entries);
    const proposal = proposeTranslator({
      code: body.code,
      codecYaml,
      deviceYaml,
      ...(body.name !== undefined ? { name: body.name } : {}),
      ...(body.version !== undefined ? { version: body.version } : {}),
      decoded: samples.uplinks,
    });
    proposal.review.push(...downlinkNotes(downlinks, samples.downlinks));
    res.json(proposal);
  });

  router.get('/api/translators/:id', async (req, res) => {
    const row = await deps.db.selectFrom('translators').selectAll().where('id', '=', req.params.id as string).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    res.json(present(row, true));
  });

  /** The uploads and deletions of every version of this version's name, each version compared as `GET` shows it. */
  router.get('/api/translators/:id/revisions', async (req, res) => {
    const row = await deps.db.selectFrom('translators').select('name').where('id', '=', req.params.id as string).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    type Versions = Record<string, ReturnType<typeof present>>;
    const fold = {
      initial: (): Versions => ({}),
      evolve(versions: Versions, event: RecordedEvent): Versions {
        const e = event as RecordedEvent & TranslatorEvent;
        if (e.type === 'TranslatorUploaded') return { ...versions, [e.data.version]: present(rowOf(e.data), true) };
        if (e.type === 'TranslatorDeleted') {
          const { [e.data.version]: _gone, ...rest } = versions;
          return rest;
        }
        return versions;
      },
      view: (versions: Versions) => ({ versions }),
    };
    res.json(await revisions(streamEvents(deps.store, translatorStream(row.name)), fold));
  });

  /** The devices the caller can read whose preferences or model name resolve to this version. */
  router.get('/api/translators/:id/devices', async (req, res) => {
    const id = req.params.id as string;
    const row = await deps.db.selectFrom('translators').select('id').where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    const users = translation.usersOf(id);
    const devices = users.length
      ? // One array parameter: a list of ids as parameters stops at PostgreSQL's 65,535 per statement.
        await deps.db.selectFrom('devices').select(['id', 'name']).where(sql<boolean>`id = ANY(${users}::text[])`).where(readableBy(principalOf(req), 'devices.id')).orderBy('name').orderBy('id').execute()
      : [];
    res.json(devices.map((d) => ({ _id: d.id, name: d.name })));
  });

  router.delete('/api/translators/:id', async (req, res) => {
    const id = req.params.id as string;
    const row = await deps.db.selectFrom('translators').select(['name', 'version']).where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    const users = translation.usersOf(id);
    if (users.length > 0) {
      throw new ConflictError(`Translator ${row.name} ${row.version} is in use by ${users.length} iotnode${users.length === 1 ? '' : 's'}; change their translatorPreferences or deviceModelName first`);
    }
    const context = requestContext(deps, req);
    await write(deps, context, translatorStream(row.name), translatorDecider, { type: 'DeleteTranslator', id, name: row.name, at: context.now }, { retries: 3 });
    res.status(204).end();
  });

  return router;
}

function requireCodec(entries: Entries): void {
  if (!entries.decodeUplink) throw ValidationError.field('code', 'defines no decodeUplink function: import takes a codec in the device-repository form');
}

/** The codec's downlink examples, checked against what its encodeDownlink gives. */
function downlinkNotes(examples: ReturnType<typeof downlinkExamples>, results: Awaited<ReturnType<Sandbox['sample']>>['downlinks']): ReviewNote[] {
  return examples.map((example, i) => {
    const label = `downlink example ${i}${example.description ? ` (${JSON.stringify(example.description)})` : ''}`;
    const result = results[i]!;
    if ('error' in result) return { note: `${label}: encodeDownlink failed (${result.kind}): ${result.error}` };
    const expected = isRecord(example.output) ? example.output : {};
    if (!Array.isArray(expected.bytes) || !expected.bytes.every((b) => typeof b === 'number')) return { note: `${label}: its expected output has no bytes to compare` };
    const got = { bytes: [...Buffer.from(result.ok.hexEncoded, 'hex')], fPort: result.ok.fPort };
    const difference = firstDifference({ bytes: expected.bytes, ...(expected.fPort !== undefined ? { fPort: expected.fPort } : {}) }, { bytes: got.bytes, ...(expected.fPort !== undefined ? { fPort: got.fPort } : {}) }, 'output');
    return { note: difference ? `${label}: ${difference}` : `${label}: encodeDownlink gives the expected bytes` };
  });
}
