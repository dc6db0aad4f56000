import { lazy, Suspense, useEffect, useMemo, useState } from 'react';
import { Link, useParams } from 'react-router';
import { api, ApiError, describe, get } from '../lib/api';
import { load, useDevice } from '../lib/devices';
import { formatValue, relativeTime } from '../lib/format';
import { offers, openapi, requestSchema, standalone, type OpenApiDoc } from '../lib/openapi';
import { useApi } from '../lib/useApi';
import { can } from '../lib/session';
import { ErrorText, Loading } from '../components/ui';
import { DeviceChart } from '../widgets/charts';
import { SchemaForm, apiErrors } from '../forms/SchemaForm';
import type { IntegrationInfo } from '../forms/adapt';
import type { ErrorSchema } from '@rjsf/utils';
import { LogTable, type LogEntry } from '../components/LogTable';

const INTERNAL = new Set(['_id', 'rabbitRouting', 'translatorPreferences']);
const ShareDialog = lazy(() => import('./Share'));

/** One device: its fields (live), history charts, downlink queue and commands, and its logs. */
export default function DevicePage() {
  const { id = '' } = useParams();
  const state = useDevice(id);
  const [doc, setDoc] = useState<OpenApiDoc | null>(null);
  const [scopes, setScopes] = useState<string[]>([]);
  const [sharing, setSharing] = useState(false);
  const [sent, setSent] = useState(0);
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
        <Downlinks deviceId={id} doc={doc} version={sent} />
        <Command deviceId={id} connectorId={typeof d.connector === 'string' ? d.connector : null} doc={doc} onSent={() => setSent((n) => n + 1)} />
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

/** A downlink as `GET /api/iotnodes/{id}/downlinks` gives it (the `Command` schema). */
interface Downlink {
  commandId: string;
  command: string;
  status: string;
  fPort?: number;
  data?: string;
  error?: string;
  requestedAt?: string;
  updatedAt?: string;
}

/** Statuses a downlink leaves by itself (the network server takes it, the device's receive window comes). */
const MOVING = new Set(['requested', 'pending', 'queued']);

/** The downlink queue (`GET /api/iotnodes/{id}/downlinks`), where the platform offers it; read again while an item is on its way. */
function Downlinks({ deviceId, doc, version }: { deviceId: string; doc: OpenApiDoc | null; version: number }) {
  const offered = !!doc && offers(doc, '/api/iotnodes/{id}/downlinks', 'get');
  const { data, error, reload } = useApi<Downlink[]>(offered ? `/api/iotnodes/${deviceId}/downlinks?limit=20` : null, 'Reading the downlink queue');
  const items = data ?? [];
  const moving = items.some((x) => MOVING.has(x.status));
  useEffect(() => {
    if (version > 0) void reload();
  }, [version, reload]);
  useEffect(() => {
    if (!moving) return;
    const timer = setInterval(() => void reload(), 2_000);
    return () => clearInterval(timer);
  }, [moving, reload]);
  return (
    <div className="card" role="region" aria-labelledby="downlinks-title">
      <h2 id="downlinks-title">Downlink queue</h2>
      {!doc ? (
        <Loading />
      ) : !offered ? (
        <p className="muted" role="note">
          This platform does not keep a downlink queue yet (it offers no GET /api/iotnodes/{'{id}'}/downlinks).
        </p>
      ) : (
        <>
          <ErrorText>{error}</ErrorText>
          {data && items.length === 0 && <p className="muted">No downlinks yet.</p>}
          {items.length > 0 && (
            <table className="table small" aria-label="Downlinks">
              <thead>
                <tr>
                  <th scope="col">Status</th>
                  <th scope="col">Command</th>
                  <th scope="col">Port</th>
                  <th scope="col">Payload</th>
                  <th scope="col">Requested</th>
                </tr>
              </thead>
              <tbody>
                {items.map((x) => (
                  <tr key={x.commandId} data-command={x.commandId}>
                    <td data-status={x.status}>
                      {x.status}
                      {x.error && <span className="error small"> ({x.error})</span>}
                    </td>
                    <td>{x.command}</td>
                    <td>{x.fPort ?? ''}</td>
                    <td>
                      <code>{x.data ?? ''}</code>
                    </td>
                    <td>{relativeTime(x.requestedAt)}</td>
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

/**
 * A device command (`PUT /api/iotnodes/command`). The commands are those the
 * device's connector's integration takes (`GET /api/integrations`); the form
 * for the chosen one is its `data` schema in the OpenAPI document.
 */
function Command({ deviceId, connectorId, doc, onSent }: { deviceId: string; connectorId: string | null; doc: OpenApiDoc | null; onSent: () => void }) {
  const offered = !!doc && !!requestSchema(doc, '/api/iotnodes/command', 'put');
  const listed = !!doc && offers(doc, '/api/integrations', 'get');
  const connector = useApi<{ name: string; integration: string }>(offered && connectorId ? `/api/connectors/${connectorId}` : null, "Reading the device's connector");
  const integrations = useApi<IntegrationInfo[]>(offered && listed && connectorId ? '/api/integrations' : null, 'Reading the integrations');
  const commands = useMemo(() => (integrations.data?.find((i) => i.name === connector.data?.integration)?.commands ?? []).filter((c) => c.target === 'device'), [integrations.data, connector.data]);
  const [chosen, setChosen] = useState('');
  const command = commands.find((c) => c.name === chosen) ?? commands[0];
  const schema = useMemo(() => (doc && command ? standalone(doc, command.data.replace('#/components/schemas/', '')) : null), [doc, command]);
  const [data, setData] = useState<unknown>({});
  const [extra, setExtra] = useState<ErrorSchema>();
  const [commandError, setCommandError] = useState<string | null>(null);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  if (!doc) return null;
  const send = async (body: unknown) => {
    setExtra(undefined);
    setCommandError(null);
    setResult(null);
    setBusy(true);
    try {
      const answer = await api<{ commandId: string; status: string; items?: unknown[] }>('PUT', '/api/iotnodes/command', { body: { command: command!.name, iotnodeId: deviceId, data: body ?? {} } });
      const what = answer.status === 'pending' ? 'Stored; the network server has not answered yet, the platform keeps trying' : answer.items ? `The network server holds ${answer.items.length} item(s)` : `Accepted: ${answer.status}`;
      setResult({ ok: true, text: `${what} (command ${answer.commandId}).` });
      onSent();
    } catch (e) {
      if (e instanceof ApiError && e.status === 422 && e.field === 'command') setCommandError(`${e.field} ${e.why}`);
      const mapped = apiErrors(e, 'data.');
      setExtra(mapped.extra);
      setResult({ ok: false, text: mapped.message ?? describe(e, 'Sending the command') });
    } finally {
      setBusy(false);
    }
  };
  const pick = (name: string) => {
    setChosen(name);
    setData({});
    setExtra(undefined);
    setCommandError(null);
    setResult(null);
  };
  return (
    <div className="card" role="region" aria-labelledby="command-title">
      <h2 id="command-title">Send a command</h2>
      {!offered ? (
        <p className="muted" role="note">
          This platform does not send device commands yet (it offers no PUT /api/iotnodes/command).
        </p>
      ) : !can('device', 'PUT') ? (
        <p className="muted">Your role does not allow sending commands.</p>
      ) : !connectorId ? (
        <p className="muted" role="note">
          Commands go through the device&apos;s connector, and this device has none: set its connector first.
        </p>
      ) : connector.error || integrations.error ? (
        <ErrorText>{connector.error ?? integrations.error}</ErrorText>
      ) : !connector.data || !integrations.data ? (
        <Loading />
      ) : commands.length === 0 ? (
        <p className="muted" role="note">
          The {connector.data.integration} integration of {connector.data.name} takes no device commands.
        </p>
      ) : (
        <>
          <p className="muted small">
            Through {connector.data.name} ({connector.data.integration}). Accepted means queued at the network server, not yet delivered: the queue shows what becomes of it.
          </p>
          <div className="field">
            <label htmlFor="command-name">Command</label>
            <select id="command-name" value={command!.name} onChange={(e) => pick(e.target.value)} aria-describedby={commandError ? 'command-name-error' : undefined}>
              {commands.map((c) => (
                <option key={c.name} value={c.name}>
                  {c.name} ({c.kind})
                </option>
              ))}
            </select>
            <ErrorText id="command-name-error">{commandError}</ErrorText>
          </div>
          {schema && (
            <SchemaForm key={command!.name} schema={schema} formData={data} onChange={setData} onSubmit={(d) => void send(d)} extraErrors={extra} idPrefix="command">
              <button type="submit" className="primary" disabled={busy}>
                {busy ? 'Sending…' : 'Send'}
              </button>
            </SchemaForm>
          )}
        </>
      )}
      {result && (
        <p className={result.ok ? 'ok' : 'error'} role={result.ok ? 'status' : 'alert'}>
          {result.text}
        </p>
      )}
    </div>
  );
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
      {logs && <LogTable logs={logs} />}
    </div>
  );
}
