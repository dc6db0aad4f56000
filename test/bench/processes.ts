import { spawn, type ChildProcess } from 'node:child_process';

const ROOT = new URL('../..', import.meta.url).pathname;

export interface Ports {
  http?: number;
  mqtt?: number;
}

/**
 * Runs `node --import tsx <args>` from the repository root as a process of its
 * own, so a benchmark's load generator never shares the server's event loop.
 * Resolves with the ports its JSON log says it listens on, once `ready` holds
 * (by default: both HTTP and MQTT). `BENCH_PROFILE=<dir>` CPU-profiles the
 * platform (`api/main.ts`) into that folder.
 */
export function spawnProcess(
  args: string[],
  env: Record<string, string>,
  ready: (ports: Ports) => boolean = (p) => p.http !== undefined && p.mqtt !== undefined,
): Promise<{ child: ChildProcess; ports: Ports }> {
  return new Promise((resolve, reject) => {
    const profile = process.env.BENCH_PROFILE && args[0] === 'api/main.ts' ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
    const child = spawn(process.execPath, [...profile, '--import', 'tsx', ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
    const ports: Ports = {};
    let buffer = '';
    child.stdout!.on('data', (chunk) => {
      buffer += chunk;
      for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + 1);
        try {
          const entry = JSON.parse(line) as { msg?: string; port?: number };
          if (entry.msg === 'HTTP listening') ports.http = entry.port;
          if (entry.msg === 'MQTT listening') ports.mqtt = entry.port;
          if (ready(ports)) resolve({ child, ports });
        } catch {
          // not a log line
        }
      }
    });
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited with ${code}`)));
  });
}
