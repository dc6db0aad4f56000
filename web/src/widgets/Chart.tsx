import { useEffect, useRef } from 'react';
import {
  ArcElement,
  BarController,
  BarElement,
  CategoryScale,
  Chart,
  DoughnutController,
  Filler,
  Legend,
  LinearScale,
  LineController,
  LineElement,
  PieController,
  PointElement,
  Tooltip,
  type ChartConfiguration,
} from 'chart.js';

Chart.register(LineController, BarController, PieController, DoughnutController, LineElement, PointElement, BarElement, ArcElement, LinearScale, CategoryScale, Filler, Legend, Tooltip);

export const PALETTE = ['#1f6feb', '#d1242f', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#0a7ea4', '#6e7781'];

/** Time ticks for a linear x axis in milliseconds: no date adapter needed. */
export function timeTick(span: number) {
  return (v: number | string) => {
    const d = new Date(Number(v));
    return span > 2 * 86400_000 ? d.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }) : d.toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit', second: span < 600_000 ? '2-digit' : undefined });
  };
}

/** A chart.js chart that follows its configuration: data changes update in place, without animation. */
export function ChartCanvas({ config, label }: { config: ChartConfiguration; label: string }) {
  const canvas = useRef<HTMLCanvasElement>(null);
  const chart = useRef<Chart | null>(null);
  useEffect(() => {
    chart.current = new Chart(canvas.current!, { ...config, options: { animation: false, responsive: true, maintainAspectRatio: false, ...config.options } });
    return () => {
      chart.current?.destroy();
      chart.current = null;
    };
    // The chart type is fixed for a canvas; other changes go through update below.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [config.type]);
  useEffect(() => {
    const c = chart.current;
    if (!c) return;
    c.data = config.data;
    c.options = { animation: false, responsive: true, maintainAspectRatio: false, ...config.options } as typeof c.options;
    c.update('none');
  }, [config]);
  return (
    <div className="chart-box">
      <canvas ref={canvas} role="img" aria-label={label} />
    </div>
  );
}
