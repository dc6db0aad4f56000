import { useEffect, useMemo, useState } from 'react';
import { get } from '../lib/api';
import { onChange, touches, useDevice, useDevices, valueAt, type DeviceState } from '../lib/devices';
import { formatValue, relativeTime, thresholdColor, toNumber, type Threshold } from '../lib/format';
import { statsUrl } from '../lib/time';
import { deviceProblem, Heading, NoAccess, settled, useReady, type WidgetProps } from './common';

interface DeviceValueSettings {
  deviceId: string;
  field: string;
  display: 'text' | 'circle' | 'bar' | 'gauge';
  color: string;
  shouldShowHeading: boolean;
  shouldShowSubheading: boolean;
  customHeading?: string;
  customSubheading?: string;
  unit?: string;
  minValue?: number;
  maxValue?: number;
  thresholds?: Threshold[];
  barDirection?: 'horizontal' | 'vertical';
  showSparkline?: boolean;
}

const fraction = (v: number | null, min = 0, max = 100) => (v === null || max <= min ? 0 : Math.min(1, Math.max(0, (v - min) / (max - min))));

/** One current value of one device: text, circle, bar or gauge, coloured by its thresholds. */
export function DeviceValue({ settings: s }: WidgetProps<DeviceValueSettings>) {
  const state = useDevice(s.deviceId);
  useReady(settled(state));
  const problem = deviceProblem(state);
  if (problem) return <>{problem}</>;
  const device = (state as Extract<DeviceState, { status: 'ok' }>).device;
  const raw = valueAt(device, s.field);
  const v = toNumber(raw);
  const color = thresholdColor(raw, s.thresholds, s.color);
  const text = formatValue(raw, s.unit);
  const f = fraction(v, s.minValue ?? 0, s.maxValue ?? 100);
  return (
    <div className="w-fill center-content">
      <Heading text={s.shouldShowHeading && (s.customHeading || device.name)} sub={s.shouldShowSubheading && (s.customSubheading || s.field)} />
      <div className="dv-body">
        {s.display === 'text' && (
          <div className="big-value" style={{ color }} data-value={String(raw ?? '')}>
            {text}
          </div>
        )}
        {s.display === 'circle' && (
          <svg viewBox="0 0 100 100" className="dv-svg" role="img" aria-label={`${s.field}: ${text}`}>
            <circle cx="50" cy="50" r="42" fill="none" stroke="#e5e7eb" strokeWidth="10" />
            <circle cx="50" cy="50" r="42" fill="none" stroke={color} strokeWidth="10" strokeDasharray={`${f * 263.9} 263.9`} transform="rotate(-90 50 50)" />
            <text x="50" y="55" textAnchor="middle" className="dv-svg-text" data-value={String(raw ?? '')}>
              {text}
            </text>
          </svg>
        )}
        {s.display === 'gauge' && (
          <svg viewBox="0 0 100 60" className="dv-svg" role="img" aria-label={`${s.field}: ${text}`}>
            <path d="M10 55 A40 40 0 0 1 90 55" fill="none" stroke="#e5e7eb" strokeWidth="10" />
            <path d="M10 55 A40 40 0 0 1 90 55" fill="none" stroke={color} strokeWidth="10" strokeDasharray={`${f * 125.7} 125.7`} />
            <text x="50" y="52" textAnchor="middle" className="dv-svg-text" data-value={String(raw ?? '')}>
              {text}
            </text>
          </svg>
        )}
        {s.display === 'bar' && (
          <div className={`dv-bar ${s.barDirection ?? 'horizontal'}`} role="meter" aria-valuenow={v ?? undefined} aria-valuemin={s.minValue ?? 0} aria-valuemax={s.maxValue ?? 100} aria-label={s.field}>
            <div className="dv-bar-fill" style={s.barDirection === 'vertical' ? { height: `${f * 100}%`, background: color } : { width: `${f * 100}%`, background: color }} />
            <span className="dv-bar-text" data-value={String(raw ?? '')}>
              {text}
            </span>
          </div>
        )}
        {s.showSparkline && <Sparkline deviceId={s.deviceId} field={s.field} color={color} />}
      </div>
      <small className="muted updated">{relativeTime(device.reportedAt ?? device.updatedAt)}</small>
    </div>
  );
}

/** The last hour of a field as a line, following live changes. */
function Sparkline({ deviceId, field, color }: { deviceId: string; field: string; color: string }) {
  const [points, setPoints] = useState<[number, number][]>([]);
  useEffect(() => {
    const end = Math.floor(Date.now() / 1000);
    const ctrl = new AbortController();
    get<{ time: string; value: unknown }[]>(statsUrl(deviceId, field, { start: end - 3600, end, distance: null }), ctrl.signal).then(
      (pts) => setPoints(pts.flatMap((p) => (toNumber(p.value) === null ? [] : [[Date.parse(p.time), toNumber(p.value)!] as [number, number]]))),
      () => {},
    );
    const off = onChange((c) => {
      if (c.deviceId !== deviceId || !touches(c, field)) return;
      const v = toNumber(valueAt(c.diff, field));
      if (v !== null) setPoints((p) => [...p.slice(-500), [c.time, v]]);
    });
    return () => {
      ctrl.abort();
      off();
    };
  }, [deviceId, field]);
  if (points.length < 2) return null;
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const d = points.map(([x, y]) => `${(((x - x0) / (x1 - x0 || 1)) * 100).toFixed(1)},${(28 - ((y - y0) / (y1 - y0 || 1)) * 26).toFixed(1)}`).join(' ');
  return (
    <svg viewBox="0 0 100 30" className="sparkline" preserveAspectRatio="none" aria-hidden="true">
      <polyline points={d} fill="none" stroke={color} strokeWidth="1.5" vectorEffect="non-scaling-stroke" />
    </svg>
  );
}

interface Item {
  deviceId: string;
  field: string;
  label?: string;
  unit?: string;
  color?: string;
  thresholds?: Threshold[];
}

/** Tiles of current values. */
export function MultiDeviceValue({ settings: s }: WidgetProps<{ items: Item[]; columns: number; colorMode: 'value' | 'background'; shouldShowHeading: boolean }>) {
  const states = useDevices(s.items.map((i) => i.deviceId));
  useReady(states.every(settled));
  return (
    <div className="w-fill">
      <Heading text={s.shouldShowHeading && 'Values'} />
      <div className="tiles" style={{ gridTemplateColumns: `repeat(${s.columns ?? 3}, minmax(0, 1fr))` }}>
        {s.items.map((item, i) => {
          const st = states[i]!;
          if (st.status !== 'ok')
            return (
              <div className="tile" key={i}>
                {deviceProblem(st)}
              </div>
            );
          const raw = valueAt(st.device, item.field);
          const color = thresholdColor(raw, item.thresholds, item.color ?? '#1f2937');
          const bg = s.colorMode === 'background';
          return (
            <div className="tile" key={i} style={bg ? { background: color, color: '#fff' } : undefined}>
              <div className="tile-label">{item.label || `${st.device.name} · ${item.field}`}</div>
              <div className="tile-value" style={bg ? undefined : { color }} data-value={String(raw ?? '')}>
                {formatValue(raw, item.unit)}
              </div>
            </div>
          );
        })}
      </div>
    </div>
  );
}

interface ColumnConfig {
  field: string;
  displayName?: string;
  displayMode?: 'text' | 'barGauge';
  thresholds?: Threshold[];
  unit?: string;
  min?: number;
  max?: number;
}

/** A row per device, a column per field; exportable as CSV. */
export function DataTable({ settings: s }: WidgetProps<{ devices: { deviceId: string; fields: string[] }[]; shouldShowHeading: boolean; columnConfigs?: Record<string, ColumnConfig>; showExportButton?: boolean }>) {
  const states = useDevices(s.devices.map((d) => d.deviceId));
  useReady(states.every(settled));
  const columns = useMemo(() => [...new Set(s.devices.flatMap((d) => d.fields))], [s.devices]);
  const config = (f: string): ColumnConfig => s.columnConfigs?.[f] ?? { field: f };
  const rows = s.devices.map((d, i) => ({ d, st: states[i]! }));
  const exportCsv = () => {
    const esc = (v: unknown) => `"${String(v ?? '').replace(/"/g, '""')}"`;
    const lines = [['device', ...columns.map((c) => config(c).displayName || c)].map(esc).join(',')];
    for (const { d, st } of rows) lines.push([st.status === 'ok' ? st.device.name : d.deviceId, ...columns.map((c) => (st.status === 'ok' && d.fields.includes(c) ? formatValue(valueAt(st.device, c)) : ''))].map(esc).join(','));
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([lines.join('\n')], { type: 'text/csv' }));
    a.download = 'table.csv';
    a.click();
    URL.revokeObjectURL(a.href);
  };
  return (
    <div className="w-fill scroll">
      <div className="row spread">
        <Heading text={s.shouldShowHeading && 'Devices'} />
        {s.showExportButton !== false && (
          <button type="button" className="small" onClick={exportCsv}>
            Export CSV
          </button>
        )}
      </div>
      <table className="table">
        <thead>
          <tr>
            <th scope="col">Device</th>
            {columns.map((c) => (
              <th scope="col" key={c}>
                {config(c).displayName || c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map(({ d, st }, i) => (
            <tr key={i}>
              <th scope="row">{st.status === 'ok' ? st.device.name : st.status === 'loading' ? '…' : <NoAccessOr st={st} />}</th>
              {columns.map((c) => {
                if (st.status !== 'ok' || !d.fields.includes(c)) return <td key={c} />;
                const cfg = config(c);
                const raw = valueAt(st.device, c);
                const color = thresholdColor(raw, cfg.thresholds, 'inherit');
                if (cfg.displayMode === 'barGauge') {
                  const f = fraction(toNumber(raw), cfg.min ?? 0, cfg.max ?? 100);
                  return (
                    <td key={c}>
                      <div className="gauge-cell" title={formatValue(raw, cfg.unit)}>
                        <div style={{ width: `${f * 100}%`, background: color === 'inherit' ? '#1f6feb' : color }} />
                        <span>{formatValue(raw, cfg.unit)}</span>
                      </div>
                    </td>
                  );
                }
                return (
                  <td key={c} style={{ color }} data-value={String(raw ?? '')}>
                    {formatValue(raw, cfg.unit)}
                  </td>
                );
              })}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function NoAccessOr({ st }: { st: DeviceState }) {
  return st.status === 'noaccess' ? <span className="no-access-inline">no access</span> : <span className="error small">{st.status === 'error' ? st.message : ''}</span>;
}

/** Vertical bars on one scale. */
export function Equalizer({ settings: s }: WidgetProps<{ items: { deviceId: string; field: string; label?: string }[]; minValue?: number; maxValue?: number }>) {
  const states = useDevices(s.items.map((i) => i.deviceId));
  useReady(states.every(settled));
  const values = s.items.map((item, i) => {
    const st = states[i]!;
    return st.status === 'ok' ? toNumber(valueAt(st.device, item.field)) : null;
  });
  const known = values.filter((v): v is number => v !== null);
  const min = s.minValue ?? Math.min(0, ...known);
  const max = s.maxValue ?? Math.max(1, ...known);
  if (states.every((x) => x.status === 'noaccess')) return <NoAccess />;
  return (
    <div className="equalizer" role="list">
      {s.items.map((item, i) => {
        const st = states[i]!;
        const label = item.label || (st.status === 'ok' ? `${st.device.name}` : item.field);
        return (
          <div className="eq-col" role="listitem" key={i} aria-label={`${label}: ${formatValue(values[i])}`}>
            <div className="eq-track">{st.status === 'noaccess' ? <span className="no-access-inline">no access</span> : <div className="eq-bar" style={{ height: `${fraction(values[i]!, min, max) * 100}%` }} />}</div>
            <div className="eq-value">{formatValue(values[i])}</div>
            <div className="eq-label">{label}</div>
          </div>
        );
      })}
    </div>
  );
}

/** Live values streaming per lane over the last `windowSeconds`; nothing is kept after the page closes. */
export function Swimlane({ settings: s }: WidgetProps<{ signals: { deviceId: string; field: string; label?: string; unit?: string; color?: string }[]; windowSeconds: number }>) {
  const states = useDevices(s.signals.map((x) => x.deviceId));
  useReady(states.every(settled));
  const windowMs = (s.windowSeconds ?? 60) * 1000;
  const [lanes, setLanes] = useState<[number, number][][]>(() => s.signals.map(() => []));
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    setLanes(s.signals.map(() => []));
    const off = onChange((c) => {
      setLanes((prev) =>
        prev.map((lane, i) => {
          const sig = s.signals[i]!;
          if (c.deviceId !== sig.deviceId || !touches(c, sig.field)) return lane;
          const v = toNumber(valueAt(c.diff, sig.field));
          return v === null ? lane : [...lane.filter((p) => p[0] > Date.now() - windowMs), [c.time, v]];
        }),
      );
    });
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => {
      off();
      clearInterval(timer);
    };
  }, [JSON.stringify(s.signals), windowMs]);
  return (
    <div className="swimlane">
      {s.signals.map((sig, i) => {
        const st = states[i]!;
        const current = st.status === 'ok' ? valueAt(st.device, sig.field) : undefined;
        const points = [...(lanes[i] ?? [])];
        const ys = points.map((p) => p[1]);
        const [y0, y1] = [Math.min(...ys, toNumber(current) ?? 0), Math.max(...ys, toNumber(current) ?? 1)];
        const d = points.map(([t, y]) => `${(100 - ((now - t) / windowMs) * 100).toFixed(2)},${(18 - ((y - y0) / (y1 - y0 || 1)) * 16).toFixed(2)}`).join(' ');
        return (
          <div className="lane" key={i}>
            <div className="lane-label">
              {sig.label || (st.status === 'ok' ? `${st.device.name} · ${sig.field}` : sig.field)}
              <span className="lane-value" data-value={String(current ?? '')}>
                {st.status === 'noaccess' ? 'no access' : formatValue(current, sig.unit)}
              </span>
            </div>
            <svg viewBox="0 0 100 20" preserveAspectRatio="none" className="lane-plot" aria-hidden="true">
              {points.length > 0 && <polyline points={points.length === 1 ? `${d} 100,${d.split(',')[1]}` : d} fill="none" stroke={sig.color ?? '#1f6feb'} strokeWidth="1.5" vectorEffect="non-scaling-stroke" />}
            </svg>
          </div>
        );
      })}
    </div>
  );
}
