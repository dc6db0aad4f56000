import { useEffect, useState, type CSSProperties } from 'react';
import { Link } from 'react-router';
import { api, ApiError, call, describe, get } from '../lib/api';
import { ErrorText, Loading } from '../components/ui';
import { useImage, useReady, type WidgetProps } from './common';
import { logsQuery } from '../lib/logs';
import { LogTable, type LogEntry } from '../components/LogTable';

/** Buttons that run a rule through its button trigger (`POST /api/rules-v2/{id}/execute`). */
export function CommandButtons({ settings: s }: WidgetProps<{ buttons: { ruleV2Id: string; triggerNodeId: string; label: string; icon?: string; color?: string; iconOnly?: boolean; textAlign?: 'left' | 'center' | 'right' }[] }>) {
  useReady(true);
  const [result, setResult] = useState<{ ok: boolean; text: string } | null>(null);
  const [busy, setBusy] = useState<number | null>(null);
  const press = async (i: number) => {
    const b = s.buttons[i]!;
    setBusy(i);
    setResult(null);
    try {
      await api('POST', `/api/rules-v2/${encodeURIComponent(b.ruleV2Id)}/execute`, { body: { triggerNodeId: b.triggerNodeId } });
      setResult({ ok: true, text: `${b.label}: sent.` });
    } catch (e) {
      const text =
        e instanceof ApiError && e.status === 404
          ? `${b.label}: the rule was not found, you have no access to it, or this platform runs no rules yet.`
          : e instanceof ApiError && e.status === 422
            ? `${b.label}: the rule refused the trigger: ${describe(e)}`
            : `${b.label}: ${describe(e, 'Running the rule')}`;
      setResult({ ok: false, text });
    } finally {
      setBusy(null);
    }
  };
  return (
    <div className="w-fill buttons">
      {s.buttons.map((b, i) => (
        <button key={i} type="button" className="cmd" disabled={busy !== null} style={{ background: b.color ?? 'blue', textAlign: b.textAlign ?? 'center' }} aria-label={b.label} onClick={() => void press(i)}>
          {b.icon && <span aria-hidden="true">{b.icon} </span>}
          {!b.iconOnly && b.label}
        </button>
      ))}
      {result && (
        <p className={result.ok ? 'ok small' : 'error small'} role={result.ok ? 'status' : 'alert'}>
          {result.text}
        </p>
      )}
    </div>
  );
}

/** A button opening another dashboard. */
export function Navigation({ settings: s }: WidgetProps<{ targetDashboardId: string; largeText?: string; smallText?: string; icon?: string; buttonStyle?: 'filled' | 'outline' | 'plain'; alignment?: 'left' | 'center' | 'right' }>) {
  useReady(true);
  return (
    <div className="w-fill nav-widget" style={{ justifyContent: s.alignment === 'left' ? 'flex-start' : s.alignment === 'right' ? 'flex-end' : 'center' }}>
      <Link to={`/dashboards/${encodeURIComponent(s.targetDashboardId)}`} className={`nav-button ${s.buttonStyle ?? 'filled'}`}>
        {s.icon && <span aria-hidden="true">{s.icon} </span>}
        <span className="nav-large">{s.largeText || 'Open dashboard'}</span>
        {s.smallText && <small>{s.smallText}</small>}
      </Link>
    </div>
  );
}

const COUNT_PATHS: Record<string, { path: string; label: string }> = {
  devices: { path: '/api/iotnodes', label: 'Devices' },
  locations: { path: '/api/locations', label: 'Locations' },
  organizations: { path: '/api/organizations', label: 'Organizations' },
  apps: { path: '/api/apps', label: 'Apps' },
  rules: { path: '/api/rules-v2', label: 'Rules' },
};

/** The count of resources of one kind (`options=count`, `X-Total-Count`), read again every 30 s. */
export function ResourceCount({ settings: s }: WidgetProps<{ resource: string }>) {
  const target = COUNT_PATHS[s.resource];
  const [count, setCount] = useState<number | null>(null);
  const [error, setError] = useState<string | null>(null);
  useReady(count !== null || error !== null);
  useEffect(() => {
    if (!target) return setError(`Unknown resource ${s.resource}.`);
    let gone = false;
    const read = () =>
      call(
        'GET',
        `${target.path}?options=count&limit=1`,
      ).then(
        (r) => {
          if (gone) return;
          const total = Number(r.headers.get('x-total-count'));
          if (Number.isFinite(total) && r.headers.has('x-total-count')) {
            setCount(total);
            setError(null);
          } else setError(`This platform does not count ${target.label.toLowerCase()} yet.`);
        },
        (e) => !gone && setError(e instanceof ApiError && e.status === 404 ? `This platform offers no ${target.label.toLowerCase()} yet.` : describe(e, 'Counting')),
      );
    void read();
    const timer = setInterval(read, 30_000);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [s.resource]);
  return (
    <div className="w-fill center-content">
      <div className="w-title">{target?.label ?? s.resource}</div>
      {error ? <ErrorText>{error}</ErrorText> : count === null ? <Loading /> : <div className="big-value" data-value={count}>{count}</div>}
    </div>
  );
}

/** The latest filtered log entries, read again every 10 s. */
export function Logs({ settings: s }: WidgetProps<{ resourceType?: string; type?: string[]; priority?: string[]; category?: string; timeRange?: { start: { amount: number; unit: string } }; title?: string }>) {
  const [logs, setLogs] = useState<LogEntry[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useReady(logs !== null || error !== null);
  const key = JSON.stringify(s);
  useEffect(() => {
    let gone = false;
    const read = () =>
      get<{ logs: LogEntry[] }>(logsQuery(s)).then(
        (page) => !gone && (setLogs(page.logs), setError(null)),
        (e) => !gone && setError(describe(e, 'Reading the logs')),
      );
    void read();
    const timer = setInterval(read, 10_000);
    return () => {
      gone = true;
      clearInterval(timer);
    };
  }, [key]);
  return (
    <div className="w-fill scroll">
      <div className="w-title">{s.title || 'Logs'}</div>
      <ErrorText>{error}</ErrorText>
      {logs && <LogTable logs={logs} tinted />}
    </div>
  );
}

const FONT_SIZES: Record<string, string> = { xs: '0.75rem', sm: '0.875rem', md: '1rem', lg: '1.125rem', xl: '1.25rem', '2xl': '1.5rem', '3xl': '1.875rem', '4xl': '2.25rem', '5xl': '3rem', '6xl': '3.75rem' };

export function Text({ settings: s }: WidgetProps<{ text: string; alignment: 'left' | 'center' | 'right'; color: string; fontSize: string; decoration: string; bold?: boolean; italic?: boolean; fontFamily?: string; backgroundColor?: string; verticalAlignment?: 'top' | 'center' | 'bottom'; opacity?: number }>) {
  useReady(true);
  const style: CSSProperties = {
    textAlign: s.alignment,
    color: s.color,
    fontSize: FONT_SIZES[s.fontSize] ?? '1rem',
    textDecoration: s.decoration,
    fontWeight: s.bold ? 700 : 400,
    fontStyle: s.italic ? 'italic' : 'normal',
    fontFamily: s.fontFamily && s.fontFamily !== 'inherit' ? s.fontFamily : undefined,
    background: s.backgroundColor ?? 'transparent',
    opacity: (s.opacity ?? 100) / 100,
    justifyContent: s.verticalAlignment === 'top' ? 'flex-start' : s.verticalAlignment === 'bottom' ? 'flex-end' : 'center',
  };
  return (
    <div className="w-fill text-widget" style={style}>
      <p>{s.text}</p>
    </div>
  );
}

export function ImageWidget({ settings: s }: WidgetProps<{ imageId: string; imageSize: 'small' | 'medium' | 'large'; shape: 'none' | 'rounded' | 'full'; background: string; horizontalAlignment: 'left' | 'center' | 'right'; verticalAlignment: 'upp' | 'center' | 'low' }>) {
  const image = useImage(s.imageId);
  useReady(image.url !== null || image.error !== null);
  const size = { small: '33%', medium: '66%', large: '100%' }[s.imageSize] ?? '100%';
  const radius = { none: '0', rounded: '12px', full: '50%' }[s.shape] ?? '0';
  return (
    <div
      className={`w-fill image-widget ${s.background === 'background' ? 'with-bg' : ''}`}
      style={{ alignItems: { left: 'flex-start', center: 'center', right: 'flex-end' }[s.horizontalAlignment], justifyContent: { upp: 'flex-start', center: 'center', low: 'flex-end' }[s.verticalAlignment] }}
    >
      <ErrorText>{image.error}</ErrorText>
      {image.url && <img src={image.url} alt="" style={{ maxWidth: size, maxHeight: size, borderRadius: radius }} />}
    </div>
  );
}
