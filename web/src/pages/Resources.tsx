import { Fragment, useEffect, useMemo, useState } from 'react';
import { useParams } from 'react-router';
import type { ErrorSchema } from '@rjsf/utils';
import { api, describe } from '../lib/api';
import { offers, openapi, requestSchema, type OpenApiDoc } from '../lib/openapi';
import { can } from '../lib/session';
import { useApi } from '../lib/useApi';
import { ErrorText, Loading, Modal } from '../components/ui';
import { apiErrors, SchemaForm, useChoices } from '../forms/SchemaForm';
import { connectorForm, discriminatedForm, ruleForm, type IntegrationInfo } from '../forms/adapt';

interface Section {
  title: string;
  /** The collection's path in the OpenAPI document (`/api/connectors`). */
  path: string;
  /** What a row shows besides its id. */
  columns: string[];
  about?: string;
}

/**
 * The resource pages: each lists a collection, creates with the form of its
 * POST schema, and deletes. Where the running platform does not offer a
 * collection (its path is not in the OpenAPI document), the page says so.
 */
const KINDS: Record<string, { title: string; sections: Section[] }> = {
  credentials: {
    title: 'Credentials and reserved topics',
    sections: [
      { title: 'Credentials sets', path: '/api/basic-credentials-sets', columns: ['username', 'createdAt'], about: 'A username and password that MQTT providers log in with; the password is never shown again.' },
      { title: 'Reserved topics', path: '/api/reserved-mqtt-topics', columns: ['topic', 'basicCredentialsSetId'], about: 'Topics only their credentials set may publish on; each reserved topic is a device.' },
    ],
  },
  connectors: {
    title: 'Connectors',
    sections: [
      { title: 'Connectors', path: '/api/connectors', columns: ['name', 'integration', 'status'] },
      { title: 'Integrations', path: '/api/integrations', columns: ['name', 'available', 'commands'], about: 'The integrations this platform supports and the commands each takes.' },
    ],
  },
  channels: {
    title: 'Channels',
    sections: [
      { title: 'Channels', path: '/api/channels', columns: ['name', 'iotnode', 'deviceGroup'], about: 'Channels push device changes to an outside service, or to MQTT output topics.' },
      { title: 'Device groups', path: '/api/devicegroups', columns: ['name', 'devices'] },
    ],
  },
  rules: { title: 'Rules', sections: [{ title: 'Rules', path: '/api/rules-v2', columns: ['name'], about: 'Rules run actions on triggers: device reports, schedules, geofences, and command buttons.' }] },
  calculations: { title: 'Calculations', sections: [{ title: 'Calculations', path: '/api/calculations', columns: ['name', 'type', 'aggregation', 'status'], about: 'Calculations derive a value from device data and write it back as a field.' }] },
};

export default function Resources() {
  const { kind = '' } = useParams();
  const page = KINDS[kind];
  const [doc, setDoc] = useState<OpenApiDoc | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    openapi().then(setDoc, (e) => setError(describe(e, 'Reading the API document')));
  }, []);
  if (!page) return <ErrorText>There is no such page.</ErrorText>;
  return (
    <section aria-labelledby="res-title">
      <h1 id="res-title">{page.title}</h1>
      <ErrorText>{error}</ErrorText>
      {!doc && !error && <Loading />}
      {doc && page.sections.map((s) => <Collection key={s.path} section={s} doc={doc} />)}
    </section>
  );
}

const show = (v: unknown): string =>
  v === undefined || v === null
    ? ''
    : Array.isArray(v)
      ? v.every((x) => x && typeof x === 'object' && 'name' in x)
        ? v.map((x) => String(x.name)).join(', ')
        : v.length > 3
          ? `${v.length} items`
          : v.map(show).join(', ')
      : typeof v === 'object'
        ? JSON.stringify(v)
        : String(v);

function Collection({ section, doc }: { section: Section; doc: OpenApiDoc }) {
  const offered = offers(doc, section.path, 'get');
  const { data, error, reload } = useApi<Record<string, unknown>[]>(offered ? section.path : null, `Listing ${section.title.toLowerCase()}`);
  const [creating, setCreating] = useState(false);
  const [actionError, setActionError] = useState<string | null>(null);
  const post = doc.paths[section.path]?.post;
  const itemPath = `${section.path}/{id}`;
  const mayCreate = !!post && can(post['x-resource'] as string, 'POST');
  const deletable = offers(doc, itemPath, 'delete') && can(doc.paths[itemPath]!.delete['x-resource'] as string, 'DELETE');
  const remove = async (id: string) => {
    setActionError(null);
    try {
      await api('DELETE', `${section.path}/${id}`);
      await reload();
    } catch (e) {
      setActionError(describe(e, 'Deleting'));
    }
  };
  const headingId = `sec-${section.path.replace(/\W+/g, '-')}`;
  return (
    <div className="card" aria-labelledby={headingId} role="region">
      <div className="page-head">
        <h2 id={headingId}>{section.title}</h2>
        {mayCreate && (
          <button type="button" className="primary" onClick={() => setCreating(true)}>
            New
          </button>
        )}
      </div>
      {section.about && <p className="muted small">{section.about}</p>}
      {!offered ? (
        <p className="muted" role="note">
          This platform does not offer {section.title.toLowerCase()} yet (its API has no GET {section.path}).
        </p>
      ) : (
        <>
          <ErrorText>{error ?? actionError}</ErrorText>
          {!data && !error && <Loading />}
          {data && data.length === 0 && <p className="muted">None yet.</p>}
          {data && data.length > 0 && (
            <table className="table">
              <thead>
                <tr>
                  {section.columns.map((c) => (
                    <th scope="col" key={c}>
                      {c}
                    </th>
                  ))}
                  <th scope="col">Id</th>
                  {deletable && <th scope="col">Actions</th>}
                </tr>
              </thead>
              <tbody>
                {data.map((row, i) => (
                  <tr key={String(row._id ?? i)}>
                    {section.columns.map((c) => (
                      <td key={c}>{show(row[c])}</td>
                    ))}
                    <td>
                      <code>{String(row._id ?? '')}</code>
                    </td>
                    {deletable && (
                      <td>
                        <button type="button" className="small danger" onClick={() => void remove(String(row._id))} aria-label={`Delete ${show(row[section.columns[0]!]) || row._id}`}>
                          Delete
                        </button>
                      </td>
                    )}
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </>
      )}
      {creating && <CreateDialog section={section} doc={doc} onClose={() => setCreating(false)} onCreated={() => (setCreating(false), void reload())} />}
    </div>
  );
}

function CreateDialog({ section, doc, onClose, onCreated }: { section: Section; doc: OpenApiDoc; onClose: () => void; onCreated: () => void }) {
  const base = useMemo(() => requestSchema(doc, section.path, 'post'), [doc, section.path]);
  const isConnector = section.path === '/api/connectors';
  const integrations = useApi<IntegrationInfo[]>(isConnector && offers(doc, '/api/integrations', 'get') ? '/api/integrations' : null, 'Reading the integrations');
  const [data, setData] = useState<Record<string, unknown>>({});
  const chosen = typeof data.integration === 'string' ? data.integration : undefined;
  const form = useMemo(() => {
    if (!base) return null;
    if (isConnector && integrations.data) return connectorForm(base, integrations.data, chosen);
    if (section.path === '/api/rules-v2') return { schema: ruleForm(base), ui: undefined };
    return { schema: discriminatedForm(base), ui: undefined };
  }, [base, isConnector, integrations.data, chosen, section.path]);
  const [extra, setExtra] = useState<ErrorSchema>();
  const [error, setError] = useState<string | null>(null);
  const [created, setCreated] = useState<Record<string, unknown> | null>(null);
  const choices = useChoices(false);
  const submit = async (body: unknown) => {
    setExtra(undefined);
    setError(null);
    try {
      const answer = await api<Record<string, unknown>>('POST', section.path, { body });
      // Secrets given once (an app's secret, a webhook secret) are shown before the dialog closes.
      if (answer && Object.keys(answer).some((k) => /secret/i.test(k))) setCreated(answer);
      else onCreated();
    } catch (e) {
      const mapped = apiErrors(e);
      setExtra(mapped.extra);
      setError(mapped.message ?? describe(e, 'Creating'));
    }
  };
  const webhook = created && integrations.data?.find((i) => i.name === created.integration)?.webhook;
  return (
    <Modal title={`New: ${section.title.toLowerCase()}`} onClose={onClose} wide>
      {created ? (
        <>
          <p className="notice">Created. Copy what follows now: it is shown this once.</p>
          <dl className="given-once" aria-label="Given once">
            {webhook && (
              <>
                <dt>Webhook URL</dt>
                <dd>
                  <code data-given="webhookUrl">{`${location.origin}${webhook.replace('{connectorId}', String(created._id))}`}</code>
                </dd>
              </>
            )}
            {Object.entries(created)
              .filter(([k]) => /secret/i.test(k))
              .map(([k, v]) => (
                <Fragment key={k}>
                  <dt>{k === 'webhookSecret' ? 'Webhook secret (sent as Authorization: Bearer <secret>)' : k}</dt>
                  <dd>
                    <code data-given={k}>{String(v)}</code>
                  </dd>
                </Fragment>
              ))}
          </dl>
          <button type="button" className="primary" onClick={onCreated}>
            Done
          </button>
        </>
      ) : !base ? (
        <p className="muted">This platform takes no new {section.title.toLowerCase()}.</p>
      ) : integrations.error ? (
        <ErrorText>{integrations.error}</ErrorText>
      ) : !choices || !form || (isConnector && !integrations.data && offers(doc, '/api/integrations', 'get')) ? (
        <Loading what="Preparing the form" />
      ) : (
        <>
          <ErrorText>{error}</ErrorText>
          <SchemaForm schema={form.schema} ui={form.ui} formData={data} onChange={(d) => setData((d ?? {}) as Record<string, unknown>)} onSubmit={(d) => void submit(d)} extraErrors={extra} choices={choices} idPrefix="create">
            <div className="row">
              <button type="submit" className="primary">
                Create
              </button>
              <button type="button" onClick={onClose}>
                Cancel
              </button>
            </div>
          </SchemaForm>
        </>
      )}
    </Modal>
  );
}
