/**
 * Secrets never leave the server through the audit log or revisions: each
 * kind the platform stores is written through REST, then looked for in every
 * answer, as JSON pages and as an NDJSON export.
 */
import { sql } from 'kysely';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { REDACTED, redact } from '../../domain/audit/redact.js';
import { diff } from '../../domain/audit/diff.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';

const unit = suite('redact');

unit('values under secret keys are replaced at any depth, keys under `secrets` stay with their values replaced, and the rest is untouched', () => {
  const data = {
    id: 'x',
    passwordHash: 'scrypt$abc',
    profile: { name: 'Ann', nested: [{ Authorization: 'Bearer t' }] },
    secrets: { settings: { 'chirpstack.apiToken': 'tok' }, webhookSecretHash: 'h', mqttPassword: 'p' },
    app: { clientSecret: 'c', secretHash: 's', apiKey: 'k', token: 't', webhookSecret: 'w', password: 'pw' },
  };
  assert.equal(redact(data), {
    id: 'x',
    passwordHash: REDACTED,
    profile: { name: 'Ann', nested: [{ Authorization: REDACTED }] },
    secrets: { settings: { 'chirpstack.apiToken': REDACTED }, webhookSecretHash: REDACTED, mqttPassword: REDACTED },
    app: { clientSecret: REDACTED, secretHash: REDACTED, apiKey: REDACTED, token: REDACTED, webhookSecret: REDACTED, password: REDACTED },
  });
  const clean = { a: 1, b: [{ c: 'd' }] };
  assert.is(redact(clean), clean, 'nothing to hide: the same object');
});

unit('a change to a secret shows as redacted on both sides, wherever the secret sits', () => {
  assert.equal(diff({ secrets: { authorization: 'a' } }, { secrets: { authorization: 'b' } }), [{ path: '/secrets/authorization', before: REDACTED, after: REDACTED }]);
  assert.equal(diff({}, { http: { headers: { Authorization: 'x' } } }), [{ path: '/http', after: { headers: { Authorization: REDACTED } } }]);
  assert.equal(diff({ passwordHash: 'a' }, {}), [{ path: '/passwordHash', before: REDACTED }]);
});

unit.run();

const rest = suite<{ t: TestPlatform; secrets: string[] }>('secrets in the audit log');

rest.before(setup);

async function setup(ctx: { t: TestPlatform; secrets: string[] }): Promise<void> {
  const t = (ctx.t = await startTestPlatform());
  const ok = async (method: string, path: string, body?: unknown, token?: string) => {
    const res = await t.call(method, path, { body, token });
    assert.ok(res.status < 300, `${method} ${path}: ${res.status} ${res.text}`);
    return res.body;
  };
  // Password hashes: a user created, changing their password, and an admin's reset.
  const ann = await givenUser(t, 'ann-with-secrets');
  await ok('PUT', '/api/auth/password', { currentPassword: ann.password, newPassword: 'anns-new-password-1' }, ann.token);
  const reset = await ok('POST', `/api/users/${ann.id}/reset-password`);
  // A credentials set's password hash.
  await ok('POST', '/api/basic-credentials-sets', { username: 'field-set', password: 'field-set-password-1' });
  // An http channel's write-only Authorization header.
  const device = await ok('POST', '/api/iotnodes', { name: 'channel target' });
  await ok('POST', '/api/channels', { iotnode: device._id, http: { url: 'http://127.0.0.1:9/hook', headers: { Authorization: 'Bearer channel-header-secret', 'X-Tenant': 'plain-header' } } });
  // A connector's write-only setting and its webhook secret (kept as a hash); an external broker's password.
  const chirp = await ok('POST', '/api/connectors', { name: 'secret network', integration: 'ChirpStack', chirpstack: { url: 'http://127.0.0.1:9', apiToken: 'chirpstack-api-token-1' } });
  await ok('POST', '/api/connectors', {
    name: 'secret broker',
    integration: 'Generic',
    mqttServer: { host: '127.0.0.1', port: 1883, protocol: 'mqtt', username: 'u', password: 'broker-password-1' },
    uplink: { topic: 'plant/#' },
    downlink: { topic: 'plant/commands' },
  });
  // A client app's MQTT login secret, as made and as rotated (kept as a hash).
  const app = await ok('POST', '/api/apps', { name: 'secret app' });
  const rotated = await ok('POST', `/api/apps/${app._id}/secret`);
  // A member's password reset by their organization unit.
  const unit = await ok('POST', '/api/organizations', { name: 'secret-unit' });
  await ok('PUT', `/api/organizations/${unit._id}/members/${ann.id}`);
  const unitReset = await ok('POST', `/api/organizations/${unit._id}/members/${ann.id}/reset-password`);
  ctx.secrets = [
    ann.password, 'anns-new-password-1', reset.temporaryPassword ?? reset.password, 'field-set-password-1', 'channel-header-secret', 'chirpstack-api-token-1', chirp.webhookSecret, 'broker-password-1',
    app.secret, rotated.secret, unitReset.temporaryPassword,
  ].filter((s): s is string => typeof s === 'string');
  assert.is(ctx.secrets.length, 11, 'every secret that was sent or handed out is known');
  // And every secret as stored: the hashes and the write-only values in the events themselves.
  const { rows } = await sql<{ v: string }>`
    SELECT data->>'passwordHash' AS v FROM es.events WHERE data ? 'passwordHash'
    UNION ALL SELECT data->>'secretHash' FROM es.events WHERE data ? 'secretHash'
    UNION ALL SELECT s.value #>> '{}' FROM es.events, jsonb_each(data->'secrets') s WHERE jsonb_typeof(data->'secrets') = 'object' AND jsonb_typeof(s.value) = 'string'
    UNION ALL SELECT s.value #>> '{}' FROM es.events, jsonb_each(data->'secrets'->'settings') s`.execute(t.platform.deps.db);
  const stored = rows.map((r) => r.v).filter(Boolean);
  assert.ok(stored.length >= 12, `stored secrets found: ${stored.length}`);
  ctx.secrets.push(...stored);
}
rest.after(async ({ t }) => t.stop());

rest('when an admin reads every event as JSON and as NDJSON, then no secret appears, and each kind shows as redacted where it was', async ({ t, secrets }) => {
  const page = await t.call('GET', '/api/audit/events?limit=1000');
  assert.is(page.status, 200, page.text);
  const ndjson = await t.call('GET', '/api/audit/events', { headers: { accept: 'application/x-ndjson' } });
  assert.is(ndjson.status, 200);
  for (const text of [page.text, ndjson.text]) {
    for (const secret of secrets) assert.not.ok(text.includes(secret), `a secret (${secret.slice(0, 6)}…) leaked`);
  }
  const events = page.body.events as { type: string; data: any }[];
  const of = (type: string) => events.filter((e) => e.type === type).map((e) => e.data);
  assert.ok(of('UserCreated').length >= 2 && of('UserCreated').every((d) => d.passwordHash === REDACTED), 'user password hashes');
  assert.equal(of('PasswordChanged').map((d) => d.passwordHash), [REDACTED]);
  assert.equal(of('PasswordReset').map((d) => d.passwordHash), [REDACTED, REDACTED], 'an admin\'s reset and the unit\'s');
  assert.equal(of('AppCreated').map((d) => [d.name, d.secretHash]), [['secret app', REDACTED]], 'an app\'s MQTT secret hash');
  assert.equal(of('AppSecretRotated').map((d) => d.secretHash), [REDACTED], 'the rotated one');
  assert.equal(of('CredentialsSetCreated').map((d) => [d.username, d.passwordHash]), [['field-set', REDACTED]]);
  const [channel] = of('ChannelCreated');
  assert.equal(channel.secrets, { authorization: REDACTED }, 'the write-only channel header');
  assert.equal(channel.doc.http.headers, { 'X-Tenant': 'plain-header' }, 'other headers are not secrets');
  const connectors = of('ConnectorCreated');
  const chirp = connectors.find((d) => d.doc.integration === 'ChirpStack');
  assert.equal(chirp.secrets, { settings: { 'chirpstack.apiToken': REDACTED }, webhookSecretHash: REDACTED }, 'write-only settings and the webhook secret hash');
  assert.equal(chirp.doc.chirpstack, { url: 'http://127.0.0.1:9' });
  const broker = connectors.find((d) => d.doc.integration === 'Generic');
  assert.equal(broker.secrets, { mqttPassword: REDACTED }, 'an external broker\'s password');
});

rest.run();
