/**
 * `npm run bench:dashboards`: reading a 30-widget dashboard (mixed templates)
 * under load, beside `GET /api/health` on the same server in the same run as
 * the baseline. The platform runs in this process on a throw-away cluster;
 * the load generator (autocannon, 50 connections) runs in a child process so
 * it does not share the server's event loop. Prints one JSON object.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startTestCluster } from '../support/cluster.js';
import { startTestPlatform } from '../support/platform.js';
import { TEMPLATES } from '../dashboards/given.js';

const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const WIDGETS = 30;

interface Figures {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
}

const autocannon = fileURLToPath(new URL('../../node_modules/autocannon/autocannon.js', import.meta.url));

async function load(url: string, token: string | null): Promise<Figures> {
  const args = [autocannon, '-c', String(CONNECTIONS), '-d', String(SECONDS), '--json'];
  if (token) args.push('-H', `authorization=Bearer ${token}`);
  args.push(url);
  const { stdout } = await promisify(execFile)(process.execPath, args, { maxBuffer: 64 * 1024 * 1024 });
  const r = JSON.parse(stdout) as {
    requests: { average: number; total: number };
    latency: { p50: number; p99: number };
    non2xx: number;
    errors: number;
  };
  return { requestsPerSecond: r.requests.average, p50Ms: r.latency.p50, p99Ms: r.latency.p99, requests: r.requests.total, non2xx: r.non2xx, errors: r.errors };
}

const cluster = await startTestCluster();
const t = await startTestPlatform({ logLevel: 'silent' });
try {
  const created = await t.call('POST', '/api/dashboards', {
    body: { name: 'Bench', title: 'Thirty widgets', headerSettings: { titleFontSize: 24, align: 'center' } },
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
  const id = created.body._id as string;
  const cases = Object.entries(TEMPLATES);
  for (let i = 0; i < WIDGETS; i++) {
    const [template, c] = cases[i % cases.length]!;
    const res = await t.call('POST', `/api/dashboards/${id}/widgets`, { body: { template, settings: { ...c.minimal, ...c.optional } } });
    if (res.status !== 201) throw new Error(`add ${template}: ${res.status} ${res.text}`);
  }
  const check = await t.call('GET', `/api/dashboards/${id}`);
  if (check.body.widgets.length !== WIDGETS || check.body.widgets.some((w: { _broken?: boolean }) => w._broken)) throw new Error('the bench dashboard is not as built');

  const dashboard = await load(`${t.baseUrl}/api/dashboards/${id}`, t.adminToken);
  const health = await load(`${t.baseUrl}/api/health`, null);
  console.log(
    JSON.stringify({
      bench: 'dashboards',
      widgets: WIDGETS,
      templates: new Set(check.body.widgets.map((w: { template: string }) => w.template)).size,
      responseBytes: Buffer.byteLength(check.text),
      connections: CONNECTIONS,
      seconds: SECONDS,
      dashboard,
      health,
      ratio: Number((dashboard.requestsPerSecond / health.requestsPerSecond).toFixed(3)),
      aim: { p99MsBelow: 20, ratioAtLeast: 0.3 },
    }),
  );
} finally {
  await t.stop();
  await cluster.stop();
}
