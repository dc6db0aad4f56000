import { sql } from 'kysely';
import type { RecordedEvent } from '../domain/shared/events.js';
import type { ParameterSpec, StoredExample, TranslatorEvent } from '../domain/translators/translator.js';
import { parseSemver } from '../domain/translators/semver.js';
import type { FieldMap, TranslatorSpec, UnmappedPolicy } from '../sandbox/index.js';
import type { Projection } from './runner.js';

export interface TranslatorsTable {
  id: string;
  name: string;
  version: string;
  /** The version's parts, for ordering by precedence in SQL. */
  major: number;
  minor: number;
  patch: number;
  prerelease: boolean;
  api_version: string;
  description: string;
  match: Record<string, unknown>;
  /** `match.deviceModelName` when it is a string, for the list filter. */
  device_model_name: string | null;
  parameters: Record<string, ParameterSpec>;
  spec: TranslatorSpec;
  code: string;
  field_map: FieldMap;
  unmapped: UnmappedPolicy;
  /** Each example with its `lastResult`. */
  examples: StoredExample[];
  created_by: string;
  created_at: Date;
}

export interface TranslatorsTables {
  translators: TranslatorsTable;
}

/** One row per uploaded version; an upload inserts (idempotent by id), a deletion removes. */
export const translatorsProjection: Projection = {
  name: 'translators',
  tables: ['translators'],
  async apply(tx, batch) {
    for (const e of batch as (RecordedEvent & TranslatorEvent)[]) {
      switch (e.type) {
        case 'TranslatorUploaded': {
          const d = e.data;
          const v = parseSemver(d.version);
          if (!v) continue;
          const model = typeof d.match.deviceModelName === 'string' ? d.match.deviceModelName : null;
          await sql`INSERT INTO translators (id, name, version, major, minor, patch, prerelease, api_version, description, match, device_model_name, parameters, spec, code, field_map, unmapped, examples, created_by, created_at)
            VALUES (${d.id}, ${d.name}, ${d.version}, ${v.major}, ${v.minor}, ${v.patch}, ${v.pre.length > 0}, ${d.apiVersion}, ${d.description},
              ${JSON.stringify(d.match)}::jsonb, ${model}, ${JSON.stringify(d.parameters)}::jsonb, ${JSON.stringify(d.spec)}::jsonb, ${d.code},
              ${JSON.stringify(d.fieldMap)}::jsonb, ${d.unmapped}, ${JSON.stringify(d.examples)}::jsonb, ${d.createdBy}, ${d.at})
            ON CONFLICT (id) DO NOTHING`.execute(tx);
          break;
        }
        case 'TranslatorDeleted':
          await sql`DELETE FROM translators WHERE id = ${e.data.id}`.execute(tx);
          break;
      }
    }
  },
};
