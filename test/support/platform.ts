import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig, type Config } from '../../api/config.js';
import { startPlatform, type Platform, type PlatformOptions } from '../../api/platform.js';
import { createTestDatabase } from './cluster.js';

export const ADMIN = { username: 'admin', password: 'admin-password-1' };

export interface Response<T = any> {
  status: number;
  body: T;
  text: string;
  headers: Headers;
}

export interface TestPlatform {
  platform: Platform;
  baseUrl: string;
  /** The MQTT port the platform's broker listens on. */
  mqttPort: number;
  /** Every JSON log line the platform wrote. */
  logs: Record<string, unknown>[];
  /** A token for the bootstrap admin. */
  adminToken: string;
  call<T = any>(method: string, path: string, options?: { token?: string | null; body?: unknown; raw?: string | Buffer; headers?: Record<string, string> }): Promise<Response<T>>;
  login(username: string, password: string): Promise<string>;
  stop(): Promise<void>;
}

/**
 * The whole platform in this process, on a fresh database and free ports,
 * with a bootstrap admin. Real HTTP, real PostgreSQL; nothing mocked.
 */
export async function startTestPlatform(overrides: Partial<Config> = {}, options: PlatformOptions = {}): Promise<TestPlatform> {
  const logs: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk, _enc, done) {
      for (const line of String(chunk).split('\n')) if (line) logs.push(JSON.parse(line));
      done();
    },
  });
  const config: Config = {
    ...loadConfig({}),
    port: 0,
    mqttPort: 0,
    databaseUrl: await createTestDatabase(),
    dataDir: process.env.TEST_DATA_DIR ?? '/tmp',
    jwtSecret: 'test-secret-that-is-long-enough-for-hs256-0123456789',
    adminUsername: ADMIN.username,
    adminPassword: ADMIN.password,
    logLevel: 'info',
    // Receivers and network-server stand-ins of the tests listen on loopback.
    outboundTargets: 'any',
    ...overrides,
  };
  const platform = await startPlatform(config, pino({ level: config.logLevel }, sink), options);
  const baseUrl = `http://127.0.0.1:${platform.httpPort}`;

  const call: TestPlatform['call'] = async (method, path, options = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    const token = options.token === undefined ? adminToken : options.token;
    if (token) headers.authorization = `Bearer ${token}`;
    let body: string | Buffer | undefined = options.raw;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    } else if (options.raw !== undefined && !headers['content-type']) {
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown = text;
    if (res.headers.get('content-type')?.includes('application/json') && text) parsed = JSON.parse(text);
    return { status: res.status, body: parsed as any, text, headers: res.headers };
  };
  const login = async (username: string, password: string) => {
    const res = await call('POST', '/api/auth/local', { token: null, body: { username, password } });
    if (res.status !== 200) throw new Error(`login as ${username} failed: ${res.status} ${res.text}`);
    return res.body.token as string;
  };
  let adminToken = '';
  adminToken = await login(ADMIN.username, ADMIN.password);

  return { platform, baseUrl, mqttPort: platform.mqttPort, logs, adminToken, call, login, stop: () => platform.stop() };
}
