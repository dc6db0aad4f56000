import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';

const ROOT = new URL('../..', import.meta.url).pathname;

export const NODE_ADMIN = { username: 'admin', password: 'admin-password-1' };
/** Every part that runs once across a cluster (the projection runner, each reactor, the external brokers' connections), as health names them. */
export const LEADER_PARTS = ['channels-http', 'commands', 'geofence-tracking', 'output-mqtt', 'read-models', 'rules', 'calculations'];
export const NODE_SECRET = 'cluster-test-secret-that-is-long-enough-0123456789';

/**
 * A platform node: `node --import tsx api/main.ts` as a process of its own,
 * as an operator runs one, with every JSON log line kept. With `movableClock`,
 * the same process with a clock the test moves forward (`advanceClock`,
 * test/support/clocked-node.ts).
 */
export class PlatformNode {
  child!: ChildProcess;
  http = 0;
  mqtt = 0;
  readonly logs: Record<string, any>[] = [];
  token = '';
  private expectedExit = false;
  /** How far the node's clock was moved ahead of the real time. */
  private clockOffset = 0;

  constructor(
    readonly name: string,
    private readonly env: Record<string, string>,
    private readonly options: { movableClock?: boolean } = {},
  ) {}

  get base(): string {
    return `http://127.0.0.1:${this.http}`;
  }

  get alive(): boolean {
    return this.child?.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process; resolves once it listens on HTTP and MQTT and the admin is logged in. */
  async start(): Promise<this> {
    this.http = 0;
    this.mqtt = 0;
    const env = { PORT: '0', MQTT_PORT: '0', DATA_DIR: mkdtempSync(join(tmpdir(), 'node-')), JWT_SECRET: NODE_SECRET, ADMIN_USERNAME: NODE_ADMIN.username, ADMIN_PASSWORD: NODE_ADMIN.password, LOG_LEVEL: 'info', NODE_NAME: this.name, OUTBOUND_TARGETS: 'any', ...this.env };
    const movable = this.options.movableClock === true;
    this.clockOffset = 0;
    this.child = spawn(process.execPath, ['--import', 'tsx', movable ? 'test/support/clocked-node.ts' : 'api/main.ts'], { cwd: ROOT, env: { ...process.env, ...env }, stdio: movable ? ['ignore', 'pipe', 'pipe', 'ipc'] : ['ignore', 'pipe', 'pipe'] });
    let errors = '';
    this.child.stderr!.on('data', (d) => (errors = (errors + d).slice(-20_000)));
    this.expectedExit = false;
    // A node that dies on its own is a failure of the platform: said at once, with its last words, whatever the test awaits.
    this.child.once('exit', (code, signal) => {
      if (this.expectedExit) return;
      const last = this.logs.slice(-5).map((l) => JSON.stringify(l)).join('\n');
      process.stderr.write(`\n  node ${this.name} exited by itself (${signal ?? code}):\n${errors.slice(-3000)}\n${last}\n`);
    });
    await new Promise<void>((resolve, reject) => {
      let buffer = '';
      this.child.stdout!.on('data', (d) => {
        buffer += d;
        for (let nl = buffer.indexOf('\n'); nl >= 0; nl = buffer.indexOf('\n')) {
          const line = buffer.slice(0, nl);
          buffer = buffer.slice(nl + 1);
          try {
            const entry = JSON.parse(line) as Record<string, any>;
            this.logs.push(entry);
            if (entry.msg === 'HTTP listening') this.http = entry.port;
            if (entry.msg === 'MQTT listening') this.mqtt = entry.port;
            if (this.http && this.mqtt) resolve();
          } catch {
            // not a log line
          }
        }
      });
      this.child.once('exit', (code) => reject(new Error(`node ${this.name} exited with ${code}: ${errors.slice(-3000)}`)));
    });
    this.token = (await this.call<{ token: string }>('POST', '/api/auth/local', NODE_ADMIN, null)).body.token;
    return this;
  }

  /** The node's clock, in milliseconds: the real time, plus what `advanceClock` moved it by. */
  now(): number {
    return Date.now() + this.clockOffset;
  }

  /** Moves the node's clock (a node started with `movableClock`) forward by `ms`; resolves once the platform's clock has moved. */
  async advanceClock(ms: number): Promise<void> {
    if (!this.options.movableClock) throw new Error(`node ${this.name} was not started with a movable clock`);
    const moved = new Promise<void>((resolve) => this.child.once('message', () => resolve()));
    this.child.send({ advance: ms });
    await moved;
    this.clockOffset += ms;
  }

  /** A REST call as the admin (or `token`). */
  async call<T = any>(method: string, path: string, body?: unknown, token: string | null = this.token): Promise<{ status: number; body: T; text: string }> {
    const res = await fetch(this.base + path, { method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      // not JSON
    }
    return { status: res.status, body: parsed as T, text };
  }

  async health(): Promise<{ status: number; body: Record<string, any> }> {
    try {
      const res = await fetch(`${this.base}/api/health`, { signal: AbortSignal.timeout(10_000) });
      return { status: res.status, body: (await res.json()) as Record<string, any> };
    } catch (err) {
      return { status: 0, body: { error: (err as Error).message } };
    }
  }

  /**
   * Polls the node's health until it answers `status`; a time-out names the last answer, so a failure says
   * whether the node answered otherwise (and what it said it waits for) or did not answer at all.
   */
  async healthTurns(status: number, ms: number): Promise<{ status: number; body: Record<string, any> }> {
    // Set inside the poll: declared through `as` so the compiler does not take it for null after the loop.
    let last = null as { status: number; body: Record<string, any> } | null;
    try {
      return await until(async () => {
        last = await this.health();
        return last.status === status ? last : null;
      }, ms, `${this.name}'s health to answer ${status}`);
    } catch (err) {
      throw new Error(`${(err as Error).message}; last answer: ${last ? `${last.status} ${JSON.stringify(last.body)}` : 'none'}`);
    }
  }

  /** Polls the node's health until its body's `status` is `state` (`ok`, `degraded`, `starting`); a time-out names the last answer. */
  async healthSays(state: string, ms: number): Promise<{ status: number; body: Record<string, any> }> {
    let last = null as { status: number; body: Record<string, any> } | null;
    try {
      return await until(async () => {
        last = await this.health();
        return last.body.status === state ? last : null;
      }, ms, `${this.name}'s health to say ${state}`);
    } catch (err) {
      throw new Error(`${(err as Error).message}; last answer: ${last ? `${last.status} ${JSON.stringify(last.body)}` : 'none'}`);
    }
  }

  /** The parts this node leads, as its health says. */
  async leading(): Promise<string[]> {
    const h = await this.health();
    return (h.body.cluster?.leading as string[] | undefined) ?? [];
  }

  /**
   * An MQTT client connected to this node. `onMessage` is attached before the connection is made: a resumed
   * session's queued messages can arrive, and be acknowledged by MQTT.js, before it reports the connection, so a
   * handler attached once the client is connected can miss them.
   */
  mqttClient(username: string, password: string, options: IClientOptions = {}, onMessage?: (topic: string, payload: Buffer) => void): Promise<MqttClient> {
    return new Promise((resolve, reject) => {
      const client = mqtt.connect(`mqtt://127.0.0.1:${this.mqtt}`, { username, password, reconnectPeriod: 0, connectTimeout: 10_000, protocolVersion: 4, ...options });
      if (onMessage) client.on('message', onMessage);
      client.once('connect', () => resolve(client));
      client.once('error', (err) => {
        client.end(true);
        reject(err);
      });
    });
  }

  kill(): Promise<void> {
    return this.signal('SIGKILL');
  }

  stop(): Promise<void> {
    return this.signal('SIGTERM');
  }

  private async signal(signal: NodeJS.Signals): Promise<void> {
    if (!this.alive) return;
    this.expectedExit = true;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill(signal);
    await exited;
  }
}

/** Polls until `check` gives a value other than undefined/false/null; throws naming `what` after `ms`. */
export async function until<T>(check: () => Promise<T | undefined | false | null> | T | undefined | false | null, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false && value !== null) return value as T;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
