import { lazy, Suspense, useEffect, useMemo, useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, describe, get } from '../lib/api';
import { load, useDevice } from '../lib/devices';
import { formatValue, relativeTime } from '../lib/format';
import { offers, openapi, requestSchema, type OpenApiDoc } from '../lib/openapi';
import { useApi } from '../lib/useApi';
import { can } from '../lib/session';
import { ErrorText, Loading } from '../components/ui';
import { DeviceChart } from '../widgets/charts';
import { SchemaForm, apiErrors } from '../forms/SchemaForm';
import type { ErrorSchema } from '@rjsf/utils';

const INTERNAL = new Set(['_id', 'rabbitRouting', 'translatorPreferences']);
const ShareDialog = lazy(() => import('./Share'));

/** One device: its fields (live), history charts, downlink queue and commands, and its logs. */
export default function DevicePage() {
  const { id = '' } = useParams();
  const state = useDevice(id);
  const [doc, setDoc] = useState<OpenApiDoc | null>(null);
  const [scopes, setScopes] = useState<string[]>([]);
  const [sharing, setSharing] = useState(false);
  useEffect(() => {
    openapi().then(setDoc, () => setDoc(null));
    get<{ scope: string[] }>(`/api/access-rights/resource/${encodeURIComponent(id)}/mine`).then((r) => setScopes(r.scope), () => setScopes([]));
    // Read again now and then: a device deleted meanwhile shows as gone.
    const timer = setInterval(() => void load(id), 30_000);
    return () => clearInterval(timer);
  }, [id]);
  if (state.status === 'loading') return <Loading what="Loading the device" />;
  if (state.status === 'noaccess')
    return (
      <section className="card" role="alert">
        <h1>No access</h1>
        <p>This device does not exist (it may have been deleted), or you may not read it.</p>
        <Link to="/devices">Back to the devices</Link>
      </section>
    );
  if (state.status === 'error') return <ErrorText>{state.message}</ErrorText>;
  const d = state.device;
  const fields = Object.entries(d).filter(([k]) => !INTERNAL.has(k));
  return (
    <section aria-labelledby="device-title">
      <div className="page-head">
        <h1 id="device-title">{d.name}</h1>
        <span className="row">
          <span className="muted">Last report {relativeTime(d.reportedAt)}</span>
          {scopes.includes('admin') && (
            <button type="button" onClick={() => setSharing(true)}>
              Share
            </button>
          )}
        </span>
      </div>
      {sharing && (
        <Suspense fallback={null}>
          <ShareDialog resourceId={id} resourceType="device" name={d.name} onClose={() => setSharing(false)} />
        </Suspense>
      )}
      <div className="cols">
        <div className="card">
          <h2>Fields</h2>
          <table className="table small" aria-label="Fields">
            <tbody>
              {fields.map(([k, v]) => (
                <tr key={k}>
                  <th scope="row">{k}</th>
                  <td data-field={k}>{formatValue(v)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
        <History deviceId={id} />
      </div>
      <div className="cols">
        <Downlinks deviceId={id} doc={doc} />
        <Command deviceId={id} doc={doc} />
      </div>
      <DeviceLogs deviceId={id} />
    </section>
  );
}

const PERIODS = { hour: 'Last hour', day: 'Last day', week: 'Last week', month: 'Last month' } as const;

function History({ deviceId }: { deviceId: string }) {
  const { data: fields, error } = useApi<string[]>(`/api/iotnodes/${deviceId}/stats/fields`, 'Reading the fields with history');
  const [field, setField] = useState('');
  const [period, setPeriod] = useState<keyof typeof PERIODS>('day');
  const chosen = field || fields?.[0] || '';
  const settings = useMemo(
    () => ({ deviceId, field: chosen, timePeriod: period, resolution: period === 'hour' ? 'full' : period === 'day' ? 'fiveMinutes' : 'hour', curveType: 'linear' as const, yAxisRange: 'auto' as const, calculation: 'mean', shouldShowHeading: false, shouldShowSubheading: false }),
    [deviceId, chosen, period],
  );
  return (
    <div className="card history">
      <h2>History</h2>
      <ErrorText>{error}</ErrorText>
      {fields && fields.length === 0 && <p className="muted">No field has history yet.</p>}
      {fields && fields.length > 0 && (
        <>
          <div className="row">
            <div className="field">
              <label htmlFor="hist-field">Field</label>
              <select id="hist-field" value={chosen} onChange={(e) => setField(e.target.value)}>
                {fields.map((f) => (
                  <option key={f}>{f}</option>
                ))}
              </select>
            </div>
            <div className="field">
              <label htmlFor="hist-period">Period</label>
              <select id="hist-period" value={period} onChange={(e) => setPeriod(e.target.value as keyof typeof PERIODS)}>
                {Object.entries(PERIODS).map(([k, v]) => (
                  <option key={k} value={k}>
                    {v}
                  </option>
                ))}
              </select>
            </div>
          </div>
          <div className="history-chart">
            <DeviceChart settings={settings} widgetId="history" dashboardId="" width={600} height={260} />
          </div>
        </>
      )}
    </div>
  );
}

interface Downlink {
  _id?: string;
  commandId?: string;
  status: string;
  fPort?: number | string;
  data?: string;
  createdAt?: string;
  [k: string]: unknown;
}

/** The downlink queue (`GET /api/iotnodes/{id}/downlinks`), where the platform offers it. */
function Downlinks({ deviceId, doc }: { deviceId: string; doc: OpenApiDoc | null }) {
  const offered = !!doc && offers(doc, '/api/iotnodes/{id}/downlinks', 'get');
  const { data, error, reload } = useApi<Downlink[] | { items: Downlink[] }>(offered ? `/api/iotnodes/${deviceId}/downlinks` : null, 'Reading the downlink queue');
  const items = Array.isArray(data) ? data : (data?.items ?? []);
  return (
    <div className="card">
      <h2>Downlink queue</h2>
      {!doc ? (
        <Loading />
      ) : !offered ? (
        <p className="muted" role="note">
          This platform does not keep a downlink queue yet (it offers no GET /api/iotnodes/{'{id}'}/downlinks).
        </p>
      ) : (
        <>
          <ErrorText>{error}</ErrorText>
          {data && items.length === 0 && <p className="muted">The queue is empty.</p>}
          {items.length > 0 && (
            <table className="table small">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Port</th>
                  <th scope="col">Payload</th>
                  <th scope="col">Queued</th>
                </tr>
              </thead>
              <tbody>
                {items.map((x, i) => (
                  <tr key={x._id ?? x.commandId ?? i}>
                    <td>{x.status}</td>
                    <td>{String(x.fPort ?? '')}</td>
                    <td>
                      <code>{String(x.data ?? x.payloadHex ?? '')}</code>
                    </td>
                    <td>{relativeTime(x.createdAt)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <button type="button" className="small" onClick={() => void reload()}>
            Refresh
          </button>
        </>
      )}
    </div>
  );
}

/** A device command (`PUT /api/iotnodes/command`), with the form of its request schema. */
function Command({ deviceId, doc }: { deviceId: string; doc: OpenApiDoc | null }) {
  const schema = doc ? requestSchema(doc, '/api/iotnodes/command', 'put') : null;
  const [data, setData] = useState<unknown>({ iotnodeId: deviceId });
  const [extra, setExtra] = useState<ErrorSchema>();
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  if (!doc) return null;
  const send = async (body: unknown) => {
    setExtra(undefined);
    setResult(null);
    try {
      const answer = await api<Record<string, unknown> | undefined>('PUT', '/api/iotnodes/command', { body: { ...(body as object), iotnodeId: deviceId } });
      setResult({ ok: true, text: `Accepted (queued, not yet delivered)${answer && typeof answer === 'object' && 'status' in answer ? `: ${String(answer.status)}` : ''}.` });
    } catch (e) {
      const mapped = apiErrors(e);
      setExtra(mapped.extra);
      setResult({ ok: false, text: mapped.message ?? describe(e, 'Sending the command') });
    }
  };
  return (
    <div className="card">
      <h2>Send a command</h2>
      {!schema ? (
        <p className="muted" role="note">
          This platform does not send device commands yet (it offers no PUT /api/iotnodes/command).
        </p>
      ) : !can('device', 'PUT') ? (
        <p className="muted">Your role does not allow sending commands.</p>
      ) : (
        <SchemaForm schema={schema} formData={data} onChange={setData} onSubmit={(d) => void send(d)} extraErrors={extra} idPrefix="command">
          <button type="submit" className="primary">
            Send
          </button>
        </SchemaForm>
      )}
      {result && (
        <p className={result.ok ? 'ok' : 'error'} role={result.ok ? 'status' : 'alert'}>
          {result.text}
        </p>
      )}
    </div>
  );
}

interface LogEntry {
  _id: string;
  type: string;
  priority: string;
  category: string;
  message: string;
  time: string;
}

function DeviceLogs({ deviceId }: { deviceId: string }) {
  const [logs, setLogs] = useState<LogEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    get<{ logs: LogEntry[] }>(`/api/logs?${new URLSearchParams({ resourceId: deviceId, limit: '50' })}`).then((p) => setLogs(p.logs), (e) => setError(describe(e, 'Reading the logs')));
  }, [deviceId]);
  return (
    <div className="card">
      <h2>Logs</h2>
      <ErrorText>{error}</ErrorText>
      {logs?.length === 0 && <p className="muted">No entries.</p>}
      {logs && logs.length > 0 && (
        <table className="table small">
          <thead>
            <tr>
              <th scope="col">Time</th>
              <th scope="col">Type</th>
              <th scope="col">Message</th>
            </tr>
          </thead>
          <tbody>
            {logs.map((l) => (
              <tr key={l._id}>
                <td>{new Date(l.time).toLocaleString()}</td>
                <td>
                  {l.type} · {l.priority} · {l.category}
                </td>
                <td>{l.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
