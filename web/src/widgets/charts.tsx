import { useEffect, useMemo, useState } from 'react';
import type { ChartConfiguration } from 'chart.js';
import { ApiError, describe, get } from '../lib/api';
import { onChange, touches, useDevice, useDevices, valueAt } from '../lib/devices';
import { chartWindow, statsUrl } from '../lib/time';
import { toNumber } from '../lib/format';
import { ErrorText } from '../components/ui';
import { ChartCanvas, PALETTE, timeTick } from './Chart';
import { Heading, NoAccess, useReady, type WidgetProps } from './common';

interface Point {
  time: string;
  value: unknown;
}
type Series = { status: 'loading' } | { status: 'ok'; points: [number, number][] } | { status: 'noaccess' } | { status: 'error'; message: string };

interface ChartSettings {
  timePeriod: string;
  resolution: string;
  curveType: 'step' | 'linear' | 'monotone';
  yAxisRange: 'auto' | 'fromZero';
  calculation: string;
  customFromTime?: string;
  customToTime?: string;
  customResolution?: number;
}

/**
 * The history of device fields for a chart's window, from
 * `GET /api/iotnodes/{id}/stats`; read again (coalesced) when a live change
 * touches one of the fields, so the chart follows within a second.
 */
export function useSeries(pairs: { deviceId: string; field: string }[], s: ChartSettings): Series[] {
  const key = JSON.stringify([pairs, s.timePeriod, s.resolution, s.calculation, s.customFromTime, s.customToTime, s.customResolution]);
  const [series, setSeries] = useState<Series[]>(() => pairs.map(() => ({ status: 'loading' })));
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let timer: ReturnType<typeof setTimeout> | null = null;
    const off = onChange((c) => {
      if (!pairs.some((p) => p.deviceId === c.deviceId && touches(c, p.field))) return;
      timer ??= setTimeout(() => {
        timer = null;
        setTick((t) => t + 1);
      }, 150);
    });
    return () => {
      off();
      if (timer) clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key]);
  useEffect(() => {
    const ctrl = new AbortController();
    const w = chartWindow(s);
    Promise.all(
      pairs.map((p) =>
        get<Point[]>(statsUrl(p.deviceId, p.field, w, s.calculation), ctrl.signal).then(
          (points): Series => ({ status: 'ok', points: points.flatMap((pt) => (toNumber(pt.value) === null ? [] : [[Date.parse(pt.time), toNumber(pt.value)!] as [number, number]])) }),
          (e): Series => (e instanceof ApiError && e.status === 404 ? { status: 'noaccess' } : { status: 'error', message: describe(e, 'Reading the history') }),
        ),
      ),
    ).then((all) => !ctrl.signal.aborted && setSeries(all), () => {});
    return () => ctrl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [key, tick]);
  return series;
}

const stepped = (c: ChartSettings['curveType']) => (c === 'step' ? ('before' as const) : false);

function lineConfig(s: ChartSettings, datasets: { label: string; points: [number, number][] }[], kind: 'line' | 'area' | 'bar' | 'stackedBar', legend: boolean): ChartConfiguration {
  const w = chartWindow(s);
  const span = (w.end - w.start) * 1000;
  const bar = kind === 'bar' || kind === 'stackedBar';
  return {
    type: bar ? 'bar' : 'line',
    data: {
      datasets: datasets.map((d, i) => ({
        label: d.label,
        data: d.points.map(([x, y]) => ({ x, y })),
        borderColor: PALETTE[i % PALETTE.length],
        backgroundColor: kind === 'area' ? `${PALETTE[i % PALETTE.length]}33` : PALETTE[i % PALETTE.length],
        fill: kind === 'area',
        stepped: stepped(s.curveType),
        cubicInterpolationMode: s.curveType === 'monotone' ? 'monotone' : 'default',
        pointRadius: d.points.length > 60 ? 0 : 2,
        borderWidth: 2,
        ...(bar ? { barThickness: 'flex' as const } : {}),
      })) as never,
    },
    options: {
      parsing: false,
      plugins: { legend: { display: legend }, tooltip: { enabled: true } },
      scales: {
        x: { type: 'linear', min: w.start * 1000, max: w.end * 1000, stacked: kind === 'stackedBar', ticks: { callback: timeTick(span), maxTicksLimit: 6 } },
        y: { beginAtZero: s.yAxisRange === 'fromZero', stacked: kind === 'stackedBar' },
      },
    },
  };
}

export function DeviceChart({ settings: s }: WidgetProps<ChartSettings & { deviceId: string; field: string; shouldShowHeading: boolean; shouldShowSubheading: boolean }>) {
  const device = useDevice(s.deviceId);
  const pairs = useMemo(() => [{ deviceId: s.deviceId, field: s.field }], [s.deviceId, s.field]);
  const [series] = useSeries(pairs, s);
  useReady(series!.status !== 'loading');
  const config = useMemo(() => (series!.status === 'ok' ? lineConfig(s, [{ label: s.field, points: series!.points }], 'line', false) : null), [series, s]);
  if (device.status === 'noaccess' || series!.status === 'noaccess') return <NoAccess />;
  const name = device.status === 'ok' ? device.device.name : '';
  return (
    <div className="w-fill">
      <Heading text={s.shouldShowHeading && name} sub={s.shouldShowSubheading && s.field} />
      {series!.status === 'error' && <ErrorText>{series!.message}</ErrorText>}
      {series!.status === 'ok' &&
        (series!.points.length === 0 ? <p className="muted">No history of {s.field} in this period.</p> : <ChartCanvas label={`${s.field} of ${name} over time`} config={config!} />)}
    </div>
  );
}

export function MultiDeviceChart({ settings: s }: WidgetProps<ChartSettings & { deviceFieldPairs: { deviceId: string; field: string }[]; shouldShowHeading: boolean; shouldShowLegend: boolean; chartType?: 'line' | 'area' | 'bar' | 'stackedBar' }>) {
  const series = useSeries(s.deviceFieldPairs, s);
  useReady(series.every((x) => x.status !== 'loading'));
  const datasets = useMemo(
    () =>
      s.deviceFieldPairs.flatMap((p, i) => {
        const x = series[i];
        return x?.status === 'ok' ? [{ label: `${p.field} (${p.deviceId.slice(-6)})`, points: x.points }] : [];
      }),
    [series, s],
  );
  const config = useMemo(() => lineConfig(s, datasets, s.chartType ?? 'line', s.shouldShowLegend), [datasets, s]);
  const problems = s.deviceFieldPairs.flatMap((p, i) => {
    const x = series[i];
    if (x?.status === 'noaccess') return [`${p.deviceId}: no access`];
    if (x?.status === 'error') return [`${p.deviceId}: ${x.message}`];
    return [];
  });
  if (problems.length === s.deviceFieldPairs.length && series.every((x) => x.status === 'noaccess')) return <NoAccess />;
  return (
    <div className="w-fill">
      <Heading text={s.shouldShowHeading && 'Devices over time'} />
      {problems.map((p) => (
        <p key={p} className="error small">
          {p}
        </p>
      ))}
      {datasets.length > 0 && <ChartCanvas label="Fields of several devices over time" config={config} />}
    </div>
  );
}

export function PieChart({ settings: { field, devices } }: WidgetProps<{ field: string; devices: { deviceId: string; alias?: string }[] }>) {
  const states = useDevices(devices.map((d) => d.deviceId));
  useReady(states.every((x) => x.status !== 'loading'));
  const slices = devices.flatMap((d, i) => {
    const st = states[i]!;
    if (st.status !== 'ok') return [];
    const v = toNumber(valueAt(st.device, field));
    return v === null ? [] : [{ label: d.alias || st.device.name, value: v }];
  });
  if (states.every((x) => x.status === 'noaccess')) return <NoAccess />;
  const hidden = states.filter((x) => x.status === 'noaccess').length;
  return (
    <div className="w-fill">
      {hidden > 0 && <p className="muted small">{hidden} device(s): no access</p>}
      {slices.length === 0 ? (
        <p className="muted">No values of {field} yet.</p>
      ) : (
        <ChartCanvas
          label={`Share of ${field} per device`}
          config={{
            type: 'doughnut',
            data: { labels: slices.map((x) => x.label), datasets: [{ data: slices.map((x) => x.value), backgroundColor: slices.map((_, i) => PALETTE[i % PALETTE.length]!) }] },
            options: { plugins: { legend: { position: 'right' } } },
          }}
        />
      )}
    </div>
  );
}
