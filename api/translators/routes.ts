import { Router } from 'express';
import type { Deps } from '../deps.js';
import { requestContext, write } from '../deps.js';
import { ConflictError, NotFoundError, PayloadTooLargeError, ValidationError } from '../../domain/shared/errors.js';
import { newResourceId } from '../../domain/shared/ids.js';
import {
  MAX_CODE_BYTES,
  TRANSLATOR_NOT_FOUND,
  checkFields,
  translatorDecider,
  translatorStream,
  type TranslatorFields,
} from '../../domain/translators/translator.js';
import { parseSemver } from '../../domain/translators/semver.js';
import { isTranslatorError, type Sandbox } from '../../sandbox/index.js';
import type { TranslatorsTable } from '../../projections/translators.js';
import type { Translation } from '../../ingest/translate.js';
import { readableBy } from '../access.js';
import { principalOf } from '../http.js';

type Body = Partial<TranslatorFields> & Pick<TranslatorFields, 'name' | 'version' | 'spec' | 'code'>;

const present = (row: TranslatorsTable, withCode: boolean) => ({
  _id: row.id,
  name: row.name,
  version: row.version,
  apiVersion: row.api_version,
  description: row.description,
  match: row.match,
  parameters: row.parameters,
  spec: row.spec,
  ...(withCode ? { code: row.code } : {}),
  createdBy: row.created_by,
  createdAt: row.created_at.toISOString(),
});

/** Upload checks that need the sandbox: the code compiles, its top level finishes, `translate` is defined. */
async function checkCode(sandbox: Sandbox, code: string): Promise<void> {
  try {
    await sandbox.compile(code);
  } catch (error) {
    if (!isTranslatorError(error)) throw error;
    // The sandbox's message already ends with the line and column.
    throw ValidationError.field('code', error.message);
  }
}

/**
 * The translator catalogue. It is shared platform-wide: reads need only the
 * role's GET on `translator`, uploads and deletions its POST and DELETE
 * (admins by default); there are no per-translator access rights.
 */
export function translatorRoutes(deps: Deps, sandbox: Sandbox, translation: Translation): Router {
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
    if (Buffer.byteLength(body.code, 'utf8') > MAX_CODE_BYTES) {
      throw new PayloadTooLargeError(`ERR - code is larger than ${MAX_CODE_BYTES} bytes (256 KiB)`);
    }
    const fields: TranslatorFields = {
      name: body.name,
      version: body.version,
      apiVersion: body.apiVersion ?? '1.0',
      description: body.description ?? '',
      match: body.match ?? {},
      parameters: body.parameters ?? {},
      spec: body.spec,
      code: body.code,
    };
    // Cheap checks first; compiling costs a fresh QuickJS context.
    if (!parseSemver(fields.version)) throw ValidationError.field('version', 'must be a semantic version such as 1.0.0');
    checkFields(fields);
    await checkCode(sandbox, fields.code);
    const id = newResourceId();
    const context = requestContext(deps, req);
    await write(deps, context, translatorStream(fields.name), translatorDecider, { type: 'UploadTranslator', id, createdBy: context.actor, fields, at: context.now }, { retries: 3 });
    const row = await deps.db.selectFrom('translators').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    res.status(201).json(present(row, true));
  });

  router.get('/api/translators/:id', async (req, res) => {
    const row = await deps.db.selectFrom('translators').selectAll().where('id', '=', req.params.id as string).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    res.json(present(row, true));
  });

  /** The devices the caller can read whose preferences or model name resolve to this version. */
  router.get('/api/translators/:id/devices', async (req, res) => {
    const id = req.params.id as string;
    const row = await deps.db.selectFrom('translators').select('id').where('id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError(TRANSLATOR_NOT_FOUND);
    const users = translation.usersOf(id);
    const devices = users.length
      ? await deps.db.selectFrom('devices').select(['id', 'name']).where('id', 'in', users).where(readableBy(principalOf(req), 'devices.id')).orderBy('name').orderBy('id').execute()
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
