import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const REDIS = '/usr/bin/redis-server';

/**
 * A real Redis (Debian's `redis-server` package) for tests, on a free port of
 * 127.0.0.1, with its data in a private temporary folder and append-only
 * persistence, as docs/operations.md asks of a cluster's Redis: a restart
 * (`stop`, then `start` again) keeps what it held.
 */
export class RedisServer {
  readonly dir = mkdtempSync(join(tmpdir(), 'redis-'));
  port = 0;
  output = '';
  private child: ChildProcess | null = null;

  constructor() {
    if (!existsSync(REDIS)) throw new Error(`${REDIS} is missing: install Debian's redis-server package (.ci/run does)`);
  }

  /** The server's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts, on a free port the first time and on the same port after a `stop`. */
  async start(): Promise<this> {
    if (!this.port) this.port = await freePort();
    const child = spawn(REDIS, ['--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', '', '--daemonize', 'no', '--protected-mode', 'yes'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d) => (this.output += d));
    child.stderr!.on('data', (d) => (this.output += d));
    const exited = new Promise<false>((resolve) => child.once('exit', () => resolve(false)));
    const until = Date.now() + 10_000;
    while (Date.now() < until) {
      if (await Promise.race([listening(this.port), exited])) {
        this.child = child;
        return this;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    throw new Error(`redis-server did not start: ${this.output.slice(-2000)}`);
  }

  /** Stops the server (SIGTERM: it writes its append-only file and exits). */
  async stop(): Promise<void> {
    const child = this.child;
    this.child = null;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }

  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as { port: number }).port;
      server.close(() => resolve(port));
    });
  });
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
