/**
 * `npm run bench:dashboards`: reading a 30-widget dashboard (mixed templates)
 * under load, beside `GET /api/health` on the same server in the same run as
 * the baseline. The platform runs in this process on a throw-away cluster;
 * the load generator (autocannon, 50 connections) runs in a child process so
 * it does not share the server's event loop.
 *
 * The two targets are measured in alternating rounds, so a change in the
 * machine's background load hits both alike. Requests per second are totals
 * over all rounds; p50 is the median of the rounds' p50s, p99 the worst
 * round's p99. Prints one JSON object.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { startTestCluster } from '../support/cluster.js';
import { startTestPlatform } from '../support/platform.js';
import { TEMPLATES } from '../dashboards/given.js';

const CONNECTIONS = 50;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const ROUNDS = 5;
const WIDGETS = 30;

interface Round {
  requests: number;
  seconds: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
}

interface Figures {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  rounds: { requestsPerSecond: number; p50Ms: number; p99Ms: number }[];
}

const autocannon = fileURLToPath(new URL('../../node_modules/autocannon/autocannon.js', import.meta.url));

async function load(url: string, token: string | null, seconds: number): Promise<Round> {
  const args = [autocannon, '-c', String(CONNECTIONS), '-d', String(seconds), '--json'];
  if (token) args.push('-H', `authorization=Bearer ${token}`);
  args.push(url);
  const { stdout } = await promisify(execFile)(process.execPath, args, { maxBuffer: 64 * 1024 * 1024 });
  const r = JSON.parse(stdout) as { requests: { total: number }; duration: number; latency: { p50: number; p99: number }; non2xx: number; errors: number };
  return { requests: r.requests.total, seconds: r.duration, p50: r.latency.p50, p99: r.latency.p99, non2xx: r.non2xx, errors: r.errors };
}

function summary(rounds: Round[]): Figures {
  const requests = rounds.reduce((n, r) => n + r.requests, 0);
  const seconds = rounds.reduce((n, r) => n + r.seconds, 0);
  const p50s = rounds.map((r) => r.p50).sort((a, b) => a - b);
  return {
    requestsPerSecond: Math.round(requests / seconds),
    p50Ms: p50s[Math.floor(p50s.length / 2)]!,
    p99Ms: Math.max(...rounds.map((r) => r.p99)),
    requests,
    non2xx: rounds.reduce((n, r) => n + r.non2xx, 0),
    errors: rounds.reduce((n, r) => n + r.errors, 0),
    rounds: rounds.map((r) => ({ requestsPerSecond: Math.round(r.requests / r.seconds), p50Ms: r.p50, p99Ms: r.p99 })),
  };
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

  const dashboardUrl = `${t.baseUrl}/api/dashboards/${id}`;
  const healthUrl = `${t.baseUrl}/api/health`;
  // Warm-up: compiled code paths and full connection pools before anything counts.
  await load(dashboardUrl, t.adminToken, 2);
  await load(healthUrl, null, 2);
  const dashboardRounds: Round[] = [];
  const healthRounds: Round[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    dashboardRounds.push(await load(dashboardUrl, t.adminToken, SECONDS / ROUNDS));
    healthRounds.push(await load(healthUrl, null, SECONDS / ROUNDS));
  }
  const dashboard = summary(dashboardRounds);
  const health = summary(healthRounds);
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
