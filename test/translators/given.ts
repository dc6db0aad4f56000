import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';
import { eventually, projected } from '../ingest/support.js';
import { climateSensor } from '../sandbox/fixtures.js';

export { climateHex, climateSensor, dailyTemperature, gateway } from '../sandbox/fixtures.js';

/** A translator upload body; the climate decoder unless overridden. */
export function translator(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name: 'acme-climate',
    version: '1.0.0',
    apiVersion: '1.0',
    description: 'A temperature and humidity sensor.\n\n### Decoded output\n- `temperature` °C: air temperature',
    match: { deviceModelName: 'acme-th-01' },
    parameters: {},
    spec: climateSensor.spec,
    code: climateSensor.code,
    ...overrides,
  };
}

/** A refusal's message: the text body, or `message` of a JSON list of problems. */
export function messageOf(res: { text: string; body: unknown }): string {
  const body = res.body as { message?: unknown } | undefined;
  return typeof body === 'object' && body !== null && typeof body.message === 'string' ? body.message : res.text;
}

/** Uploads a translator that must be accepted; returns it. */
export async function givenTranslator(t: TestPlatform, overrides: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const res = await t.call('POST', '/api/translators', { body: translator(overrides) });
  assert.is(res.status, 201, res.text);
  return res.body;
}

/** A device registered over REST, by the admin unless `token` says who. */
export async function givenDevice(t: TestPlatform, fields: Record<string, unknown>, token = t.adminToken): Promise<Record<string, any>> {
  const res = await t.call('POST', '/api/iotnodes', { body: fields, token });
  assert.is(res.status, 201, res.text);
  return res.body;
}

/** A raw uplink over HTTP that must be accepted; returns the device after it. */
export async function uplink(t: TestPlatform, deviceId: string, hexEncoded: string, port = 1, extra: Record<string, unknown> = {}, token = t.adminToken): Promise<Record<string, any>> {
  const res = await t.call('POST', `/api/iotnodes/${deviceId}/uplinks`, { body: { encodedData: { hexEncoded, port }, ...extra }, token });
  assert.is(res.status, 200, res.text);
  return res.body;
}

export interface LogLine {
  message: string;
  type: string;
  category: string;
  priority: string;
  time: string;
  expiresAt?: string;
  data?: Record<string, unknown>;
}

export async function logsOf(t: TestPlatform, resourceId: string, token = t.adminToken): Promise<LogLine[]> {
  const res = await t.call('GET', `/api/logs?resourceId=${resourceId}&limit=1000`, { token });
  assert.is(res.status, 200, res.text);
  return res.body.logs;
}

/** The device once `check` holds for it (reports that arrive over MQTT reach the read model shortly after their PUBACK). */
export const deviceWhen = (t: TestPlatform, id: string, check: (d: Record<string, any>) => boolean, what: string) =>
  eventually(async () => {
    const res = await t.call('GET', `/api/iotnodes/${id}`);
    return res.status === 200 && check(res.body) ? (res.body as Record<string, any>) : undefined;
  }, 10_000, what);

/** Waits for the `count`-th log entry on a resource (log writes are asynchronous). */
export function logsAtLeast(t: TestPlatform, resourceId: string, count: number, token = t.adminToken): Promise<LogLine[]> {
  return eventually(async () => {
    const logs = await logsOf(t, resourceId, token);
    return logs.length >= count ? logs : undefined;
  }, 10_000, `${count} log entries on ${resourceId}`);
}

/**
 * Lets asynchronous log writes land before asserting that none was written:
 * a translation writes its log entries before its report is stored (so before
 * the uplink is answered or the device shows it), and they are appended
 * shortly after; once every entry written is appended, the read models then
 * include everything stored by that time.
 */
export async function settle(t: TestPlatform): Promise<void> {
  await t.platform.logsWritten();
  await projected(t);
}
