/**
 * The `analytics` schema: every example in docs/analytics.md runs as the
 * read-only role and answers what the platform holds; the role reads those
 * views and nothing else; every view and column is documented; the views
 * start with the columns recorded in docs/analytics.contract.json; and the
 * translators in use are the ones ingest resolves.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import pg from 'pg';
import { Kysely, PostgresDialect } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ANALYTICS_ROLE } from '../../migrations/0052_analytics.js';
import { migrateToLatest } from '../../migrations/index.js';
import { writeLog } from '../../domain/logs/logEntry.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { projected } from '../ingest/support.js';
import { climateSensor, givenTranslator } from '../translators/given.js';

const DOC = new URL('../../docs/analytics.md', import.meta.url);
const CONTRACT = new URL('../../docs/analytics.contract.json', import.meta.url);
const doc = readFileSync(DOC, 'utf8');
const examples = [...doc.slice(doc.indexOf('## Examples')).matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());

/** View → its columns in order, each `"<name> <type>"`. */
type Contract = Record<string, string[]>;

interface Ctx {
  t: TestPlatform;
  /** A connection to the platform's database that has `SET ROLE platform_analytics`. */
  reader: pg.Client;
  inside: string;
  outside: string;
  fence: string;
  /** Devices by name, each running translators in another way. */
  devices: Record<string, string>;
}

const analytics = suite<Ctx>('analytics schema');

analytics.before(async (ctx) => {
  const t = (ctx.t = await startTestPlatform());
  const ok = async (method: string, path: string, body?: unknown) => {
    const res = await t.call(method, path, { body });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  ctx.inside = (await ok('POST', '/api/iotnodes', { name: 'inside', secret: 'site/inside', lnglat: { type: 'Point', coordinates: [4.85, 52.35] } }))._id;
  ctx.outside = (await ok('POST', '/api/iotnodes', { name: 'outside', lnglat: { type: 'Point', coordinates: [5.5, 52.35] } }))._id;
  for (const [id, temperatures] of [[ctx.inside, [20, 22, 24]], [ctx.outside, [10]]] as const) {
    for (const temperature of temperatures) await ok('POST', `/api/iotnodes/${id}/uplinks`, { encodedData: { hexEncoded: '00', port: 1 }, temperature, battery: 3.1 });
  }
  ctx.fence = (await ok('POST', '/api/geofences', { fence: { type: 'Polygon', coordinates: [[[4.8, 52.3], [4.9, 52.3], [4.9, 52.4], [4.8, 52.4], [4.8, 52.3]]] } }))._id;
  const text = { text: 'Hi', alignment: 'left', color: 'black', fontSize: 'md', decoration: 'none' };
  await ok('POST', '/api/dashboards', { name: 'Site', widgets: [{ template: 'text', settings: text }, { template: 'text', settings: text }, { template: 'map', settings: {} }] });
  await ok('POST', '/api/dashboards', { name: 'Other', widgets: [{ template: 'text', settings: text }] });
  const context = { actor: 'system:test', correlationId: 'analytics', now: new Date().toISOString() };
  ctx.devices = {};
  for (const version of ['1.0.0', '1.0.1', '1.1.0']) await givenTranslator(t, { name: 'use-a', version, match: { deviceModelName: 'model-a' } });
  // A new major version changes the data model.
  const spec = { ...climateSensor.spec, dewPoint: { type: 'number', unit: '°C', quantity: 'temperature' } };
  for (const version of ['2.0.0-beta.1', '2.0.0']) await givenTranslator(t, { name: 'use-a', version, spec, match: { deviceModelName: 'model-a' } });
  await givenTranslator(t, { name: 'use-b', version: '0.1.0' });
  const prefs = (name: string, version: string, upgradePolicy: string) => ({ name, version, upgradePolicy });
  const devices = [
    { name: 'none', translatorPreferences: [prefs('use-a', '1.0.0', 'none')] },
    { name: 'patch', translatorPreferences: [prefs('use-a', '1.0.0', 'patch'), prefs('use-b', '0.1.0', 'none')] },
    { name: 'minor', translatorPreferences: [prefs('use-a', '1.0.0', 'minor')] },
    { name: 'all', translatorPreferences: [prefs('use-a', '1.0.0', 'all')] },
    { name: 'pre', translatorPreferences: [prefs('use-a', '2.0.0-beta.1', 'none')] },
    { name: 'missing first', translatorPreferences: [prefs('use-z', '1.0.0', 'all'), prefs('use-b', '0.1.0', 'all')] },
    { name: 'by model', deviceModelName: 'model-a' },
    { name: 'model ignored', deviceModelName: 'model-a', translatorPreferences: [prefs('use-b', '0.1.0', 'none')] },
    { name: 'no translator', deviceModelName: 'model-z' },
  ];
  for (const d of devices) ctx.devices[d.name] = (await ok('POST', '/api/iotnodes', d))._id;

  await writeLog(t.platform.deps.store, { resourceId: ctx.inside, resourceType: 'device', type: 'warning', priority: 'high', category: 'system', message: 'battery low' }, context);
  await projected(t);

  ctx.reader = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await ctx.reader.connect();
  await ctx.reader.query(`SET ROLE ${ANALYTICS_ROLE}`);
});
analytics.after(async ({ t, reader }) => {
  await reader.end();
  await t.stop();
});

analytics('when every example of docs/analytics.md runs as the analytics role, then each answers from the platform\'s data', async ({ reader, inside, fence }) => {
  assert.ok(examples.length >= 5, `${examples.length} examples found`);
  const results = [];
  for (const example of examples) {
    const { rows } = await reader.query(example);
    assert.ok(rows.length > 0, `no rows from:\n${example}`);
    results.push(rows);
  }
  const [hourly, contained, templates] = results as [any[], any[], any[]];
  const mean = hourly.filter((r) => r.device_id === inside).reduce((s, r) => s + Number(r.mean_temperature) * Number(r.readings), 0) / 3;
  assert.is(mean, 22, 'the mean of 20, 22 and 24');
  assert.equal(contained.map((r) => [r.geofence_id, r.device_id]), [[fence, inside]]);
  assert.equal(templates.map((r) => [r.template, Number(r.widgets), Number(r.dashboards)]), [['text', 3, 2], ['map', 1, 1]]);
});

analytics('when the analytics role reaches past its views, then it is refused: no read model, no event, no secret, no write', async ({ reader }) => {
  const refused = async (query: string) => {
    try {
      await reader.query(query);
    } catch (error) {
      assert.is((error as { code?: string }).code, '42501', `${query}: ${(error as Error).message}`);
      return;
    }
    assert.unreachable(`${query} was allowed`);
  };
  for (const table of ['public.devices', 'public.users', 'public.credentials_sets', 'public.connectors', 'public.channels', 'public.access_rights', 'public.device_history', 'es.events', 'es.checkpoints']) {
    await refused(`SELECT * FROM ${table} LIMIT 1`);
  }
  await refused(`INSERT INTO analytics.dashboards (dashboard_id, name) VALUES ('x', 'y')`);
  await refused(`UPDATE analytics.devices SET name = 'x'`);
  await refused(`DELETE FROM analytics.logs`);
  await refused('CREATE TABLE analytics.mine (x int)');
  await refused('CREATE VIEW analytics.mine AS SELECT 1');
  const { rows } = await reader.query(`SELECT fields FROM analytics.devices WHERE name = 'inside'`);
  assert.not.ok('secret' in rows[0].fields, 'a device\'s secret is not in its fields');
  assert.is(rows[0].fields.battery, 3.1);
});

/** Every view of the schema with its columns in order, as `[name, type]`. */
async function shape(client: pg.Client): Promise<Contract> {
  const { rows } = await client.query<{ view: string; column: string; type: string }>(
    `SELECT c.table_name AS view, c.column_name AS column,
       CASE WHEN c.data_type = 'USER-DEFINED' THEN c.udt_name WHEN c.data_type = 'timestamp with time zone' THEN 'timestamptz' ELSE c.data_type END AS type
     FROM information_schema.columns c JOIN information_schema.views v ON v.table_schema = c.table_schema AND v.table_name = c.table_name
     WHERE c.table_schema = 'analytics' ORDER BY c.table_name, c.ordinal_position`,
  );
  const out: Contract = {};
  for (const r of rows) (out[r.view] ??= []).push(`${r.column} ${r.type}`);
  return out;
}

analytics('when the views are compared with the recorded contract, then each starts with its recorded columns, and every view and column is documented', async ({ t }) => {
  const owner = new pg.Client({ connectionString: t.platform.deps.config.databaseUrl! });
  await owner.connect();
  try {
    const now = await shape(owner);
    if (process.env.RECORD_ANALYTICS_CONTRACT) writeFileSync(CONTRACT, '{\n' + Object.entries(now).map(([v, c]) => `  ${JSON.stringify(v)}: [\n${c.map((x) => `    ${JSON.stringify(x)}`).join(',\n')}\n  ]`).join(',\n') + '\n}\n');
    const recorded = JSON.parse(readFileSync(CONTRACT, 'utf8')) as Contract;
    for (const [view, columns] of Object.entries(recorded)) {
      assert.ok(now[view], `analytics.${view} is in the contract and must stay`);
      assert.equal(now[view]!.slice(0, columns.length), columns, `analytics.${view} keeps its recorded columns, in order, with their types; new ones go at the end`);
    }
    for (const [view, columns] of Object.entries(now)) {
      assert.equal(columns, recorded[view], `analytics.${view} matches docs/analytics.contract.json (record an added view or column with RECORD_ANALYTICS_CONTRACT=1)`);
      const section = doc.slice(doc.indexOf(`### \`analytics.${view}\``));
      assert.ok(doc.includes(`### \`analytics.${view}\``), `docs/analytics.md documents analytics.${view}`);
      const table = section.slice(0, section.indexOf('\n### ') > 0 ? section.indexOf('\n### ') : section.indexOf('\n## '));
      for (const [column, type] of columns.map((c) => [c.slice(0, c.indexOf(' ')), c.slice(c.indexOf(' ') + 1)] as const)) assert.match(table, new RegExp(`\\| \`${column}\` \\| ${type.replace(/ /g, ' ')}`), `analytics.${view}.${column} (${type}) is documented`);
    }
  } finally {
    await owner.end();
  }
});

analytics('given translator versions and devices with preferences and model names, when the translators in use are read, then they are the ones the platform resolves', async ({ t, reader, devices }) => {
  const ids = devices;
  const { rows } = await reader.query<{ device_id: string; translator_id: string; version: string; role: string; position: number; resolved_by: string }>(
    'SELECT device_id, translator_id, translator_name, version, role, position, resolved_by FROM analytics.translators_in_use ORDER BY device_id, position',
  );
  const mine = new Set(Object.values(ids));
  const used = rows.filter((r) => mine.has(r.device_id));
  const name = Object.fromEntries(Object.entries(ids).map(([k, v]) => [v, k]));
  assert.equal(used.map((r) => [name[r.device_id], (r as any).translator_name, r.version, r.role, r.position, r.resolved_by]).sort(), [
    ['all', 'use-a', '2.0.0', 'decoder', 0, 'translatorPreferences'],
    ['by model', 'use-a', '2.0.0', 'decoder', 0, 'deviceModelName'],
    ['minor', 'use-a', '1.1.0', 'decoder', 0, 'translatorPreferences'],
    ['missing first', 'use-b', '0.1.0', 'chained', 1, 'translatorPreferences'],
    ['model ignored', 'use-b', '0.1.0', 'decoder', 0, 'translatorPreferences'],
    ['none', 'use-a', '1.0.0', 'decoder', 0, 'translatorPreferences'],
    ['patch', 'use-a', '1.0.1', 'decoder', 0, 'translatorPreferences'],
    ['patch', 'use-b', '0.1.0', 'chained', 1, 'translatorPreferences'],
    ['pre', 'use-a', '2.0.0-beta.1', 'decoder', 0, 'translatorPreferences'],
  ].sort());

  // The platform's own answer, version by version.
  const catalogue = (await t.call('GET', '/api/translators')).body as { _id: string }[];
  for (const { _id } of catalogue) {
    const platform = ((await t.call('GET', `/api/translators/${_id}/devices`)).body as { _id: string }[]).map((d) => d._id).filter((d) => mine.has(d)).sort();
    const view = [...new Set(used.filter((r) => r.translator_id === _id).map((r) => r.device_id))].sort();
    assert.equal(view, platform, `devices running ${_id}`);
  }
});

analytics('given the role already exists, when a new database is migrated, then the migration succeeds and the role reads that database\'s views', async ({ t }) => {
  const admin = new pg.Client({ connectionString: process.env.TEST_CLUSTER_URL });
  await admin.connect();
  const name = `analytics_fresh_${Date.now().toString(36)}`;
  try {
    const { rows } = await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [ANALYTICS_ROLE]);
    assert.is(rows.length, 1, 'the role is there from the template database\'s migration');
    await admin.query(`CREATE DATABASE ${name}`);
    const url = process.env.TEST_CLUSTER_URL!.replace('/postgres?', `/${name}?`);
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    try {
      await migrateToLatest(db);
    } finally {
      await db.destroy();
    }
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    try {
      await reader.query(`SET ROLE ${ANALYTICS_ROLE}`);
      const { rows: empty } = await reader.query('SELECT count(*)::int AS n FROM analytics.devices');
      assert.is(empty[0].n, 0);
    } finally {
      await reader.end();
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.end();
  }
});

analytics.run();
