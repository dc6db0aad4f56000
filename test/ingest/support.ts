import mqtt, { type IClientOptions, type MqttClient } from 'mqtt';
import { sql } from 'kysely';
import * as assert from 'uvu/assert';
import type { TestPlatform } from '../support/platform.js';

/** An MQTT.js client on the platform's broker; rejects when the broker refuses the login. */
export function connectMqtt(t: TestPlatform, username: string, password: string, options: IClientOptions = {}): Promise<MqttClient> {
  return new Promise((resolve, reject) => {
    const client = mqtt.connect(`mqtt://127.0.0.1:${t.mqttPort}`, { username, password, reconnectPeriod: 0, connectTimeout: 5000, protocolVersion: 4, ...options });
    client.once('connect', () => resolve(client));
    client.once('error', (err) => {
      client.end(true);
      reject(err);
    });
  });
}

/** Polls until `check` returns a value other than undefined/false, or fails after `ms`. */
export async function eventually<T>(check: () => Promise<T | undefined | false | null>, ms = 10_000, what = 'condition'): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false && value !== null) return value;
    if (Date.now() > until) throw new assert.Assertion({ message: `timed out waiting for ${what}`, operator: 'eventually', generated: false, expects: true, actual: false });
    await new Promise((r) => setTimeout(r, 25));
  }
}

/**
 * Resolves once the read models include every event stored so far. After a
 * PUBACK (the message is stored, or was refused) this tells "not stored" apart
 * from "not projected yet", so a read that expects nothing new is meaningful.
 */
export async function projected(t: TestPlatform, ms = 10_000): Promise<void> {
  const { rows } = await sql<{ c: string; p: string }>`SELECT transaction_id::text AS c, global_position::text AS p FROM es.events
    ORDER BY transaction_id DESC, global_position DESC LIMIT 1`.execute(t.platform.deps.db);
  if (rows[0]) await t.platform.deps.projections.waitFor({ commit: BigInt(rows[0].c), prepare: BigInt(rows[0].p) }, ms);
}

/** Resolves once the client's connection is closed by the broker (or after `ms` with false). */
export function closed(client: MqttClient, ms = 10_000): Promise<boolean> {
  return new Promise((resolve) => {
    if (!client.connected) return resolve(true);
    const timer = setTimeout(() => resolve(false), ms);
    client.once('close', () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}

export interface Provider {
  setId: string;
  username: string;
  password: string;
}

/** A credentials set with the given topics reserved to it. */
export async function givenProvider(t: TestPlatform, username: string, topics: string[], token = t.adminToken): Promise<Provider> {
  const password = `${username}-password`;
  const set = await t.call('POST', '/api/basic-credentials-sets', { token, body: { username, password } });
  assert.is(set.status, 201, set.text);
  for (const topic of topics) {
    const res = await t.call('POST', '/api/reserved-mqtt-topics', { token, body: { topic, basicCredentialsSetId: set.body._id } });
    assert.is(res.status, 201, res.text);
  }
  return { setId: set.body._id, username, password };
}

/** The device whose secret is `topic`, as the admin sees it, once it exists. */
export async function deviceOf(t: TestPlatform, topic: string, token = t.adminToken): Promise<Record<string, any>> {
  return eventually(async () => {
    const row = await t.platform.deps.db.selectFrom('devices').select('id').where('secret', '=', topic).executeTakeFirst();
    if (!row) return undefined;
    const res = await t.call('GET', `/api/iotnodes/${row.id}`, { token });
    return res.status === 200 ? (res.body as Record<string, any>) : undefined;
  }, 10_000, `the device of ${topic}`);
}

export const publish = (client: MqttClient, topic: string, payload: unknown, qos: 0 | 1 = 1) =>
  client.publishAsync(topic, typeof payload === 'string' || Buffer.isBuffer(payload) ? payload : JSON.stringify(payload), { qos });
