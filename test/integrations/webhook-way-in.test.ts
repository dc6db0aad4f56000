import { request } from 'node:http';
import { gzipSync } from 'node:zlib';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { climateHex, deviceWhen, givenTranslator, logsOf } from '../translators/given.js';

/**
 * A network server's webhook answers every input alike whichever way it comes
 * in. A call to `POST /api/integrations/<integration>/<connectorId>` takes the
 * direct way (`api/direct.ts`); the same call with a trailing slash is left to
 * the full HTTP pipeline (router, input check, OpenAPI validator), which
 * treats the two paths as one (test/api/direct.test.ts shows which way each
 * request takes). Each input is sent both ways and must get the same status,
 * media type and body; each case also names the answer it expects, so a
 * change that made both ways wrong alike still fails.
 */

const EUI = '70b3d57ed0053a01';
const UNKNOWN_EUI = '70b3d57ed0053aff';

interface Ctx {
  t: TestPlatform;
  connectorId: string;
  secret: string;
  deviceId: string;
}

interface Call {
  path: string;
  query?: string;
  headers?: Record<string, string>;
  /** A string or bytes sent with its Content-Length; an array of chunks is sent as it comes, chunked unless the headers give a Content-Length. */
  body?: string | Buffer | Buffer[];
}

interface Answer {
  status: number;
  type: string | undefined;
  text: string;
  requestId: string | undefined;
  /** Every header but those that differ from one answer to the next (`Date`, `X-Request-Id`), in the order sent. */
  headers: string[];
}

const webhook = suite<Ctx>('Webhooks: the direct way in answers every input as the full HTTP pipeline does');

webhook.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const connector = await ctx.t.call('POST', '/api/connectors', { body: { name: 'way in', integration: 'ChirpStack', chirpstack: { url: 'http://127.0.0.1:9', apiToken: 'unused' } } });
  assert.is(connector.status, 201, connector.text);
  ctx.connectorId = connector.body._id;
  ctx.secret = connector.body.webhookSecret;
  await givenTranslator(ctx.t);
  const device = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'way-in node', connector: ctx.connectorId, devEui: EUI, translatorPreferences: [{ name: 'acme-climate', version: '1.0.0', upgradePolicy: 'none' }] } });
  assert.is(device.status, 201, device.text);
  ctx.deviceId = device.body._id;
});
webhook.after(async (ctx) => {
  await ctx.t.stop();
});

function send(t: TestPlatform, call: Call): Promise<Answer> {
  const url = new URL(t.baseUrl);
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, method: 'POST', path: call.query ? `${call.path}?${call.query}` : call.path, headers: { ...call.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const headers: string[] = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) if (!/^(date|x-request-id)$/i.test(res.rawHeaders[i]!)) headers.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: res.headers['content-type'], text: Buffer.concat(chunks).toString('utf8'), requestId: res.headers['x-request-id'] as string | undefined, headers }));
      res.on('error', reject);
    });
    // The server may answer (413) before the whole body is sent, and close; the answer is what counts.
    req.on('error', (err) => (err as NodeJS.ErrnoException).code === 'EPIPE' || (err as NodeJS.ErrnoException).code === 'ECONNRESET' ? undefined : reject(err));
    if (Array.isArray(call.body)) {
      const chunks = call.body;
      // Each chunk in a write of its own, a moment apart, so the server reads them as separate chunks.
      const next = (i: number): void => {
        if (i === chunks.length) return void req.end();
        req.write(chunks[i]);
        setTimeout(() => next(i + 1), 5);
      };
      next(0);
    } else if (call.body !== undefined) {
      req.setHeader('content-length', Buffer.byteLength(call.body));
      req.end(call.body);
    } else {
      req.end();
    }
  });
}

/** The call as it is (the direct way), and with a trailing slash on its path (the full pipeline). */
async function bothWays(t: TestPlatform, call: Call): Promise<{ bare: Answer; slashed: Answer }> {
  const bare = await send(t, call);
  const slashed = await send(t, { ...call, path: `${call.path}/` });
  return { bare, slashed };
}

const upEvent = (devEui: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ deduplicationId: crypto.randomUUID(), time: new Date().toISOString(), deviceInfo: { devEui }, fCnt: 1, fPort: 1, data: Buffer.from(climateHex(20, 40, 3000), 'hex').toString('base64'), ...extra });
const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;
const JSON_TYPE = { 'content-type': 'application/json' };

interface Case {
  name: string;
  call: (ctx: Ctx) => Call;
  /** The answer's status, and a part of its body. */
  status: number;
  says: string;
}

const auth = (ctx: Ctx) => ({ ...JSON_TYPE, authorization: `Bearer ${ctx.secret}` });
const hook = (ctx: Ctx) => `/api/integrations/chirpstack/${ctx.connectorId}`;

const CASES: Case[] = [
  { name: 'no Authorization', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: JSON_TYPE, body: upEvent(UNKNOWN_EUI) }), status: 401, says: 'Unauthorized' },
  { name: 'a wrong secret', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...JSON_TYPE, authorization: 'Bearer not-the-secret' }, body: upEvent(UNKNOWN_EUI) }), status: 401, says: 'Unauthorized' },
  { name: 'the secret in another scheme', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...JSON_TYPE, authorization: `Basic ${ctx.secret}` }, body: upEvent(UNKNOWN_EUI) }), status: 401, says: 'Unauthorized' },
  { name: 'a connector that does not exist', call: (ctx) => ({ path: '/api/integrations/chirpstack/0123456789abcdef01234567', query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 401, says: 'Unauthorized' },
  { name: "another integration's path for the connector", call: (ctx) => ({ path: `/api/integrations/loriot/${ctx.connectorId}`, headers: auth(ctx), body: '{"cmd":"rx"}' }), status: 401, says: 'Unauthorized' },
  { name: 'a connector id that is no id', call: (ctx) => ({ path: '/api/integrations/chirpstack/not-an-id', query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - connectorId' },
  { name: 'an upper-case connector id', call: (ctx) => ({ path: `/api/integrations/chirpstack/${ctx.connectorId.toUpperCase()}`, query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - connectorId' },
  { name: 'an integration that does not exist', call: (ctx) => ({ path: `/api/integrations/nope/${ctx.connectorId}`, headers: auth(ctx), body: '{}' }), status: 422, says: 'ERR - integration' },
  { name: 'a body that is not JSON', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: '{"deviceInfo":' }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'a JSON string for a body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: '"up"' }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'a JSON array for a body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: '[{"deviceInfo":{}}]' }), status: 422, says: 'ERR - body must be object' },
  { name: 'an empty body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: '' }), status: 422, says: 'ERR - ' },
  { name: 'a body of another media type', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-type': 'text/plain' }, body: upEvent(UNKNOWN_EUI) }), status: 415, says: 'ERR - unsupported media type text/plain' },
  { name: 'no Content-Type', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { authorization: `Bearer ${ctx.secret}` }, body: upEvent(UNKNOWN_EUI) }), status: 415, says: 'ERR - unsupported media type' },
  { name: 'a charset other than UTF-8', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-type': 'application/json; charset=latin1' }, body: upEvent(UNKNOWN_EUI) }), status: 415, says: 'send JSON as UTF-8' },
  { name: 'a body over 1 MiB', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI, { pad: 'x'.repeat(1_100_000) }) }), status: 413, says: 'ERR - body is larger than 1048576 bytes' },
  { name: 'a body over 1 MiB, sent chunked', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: [Buffer.from(upEvent(UNKNOWN_EUI, { pad: 'x'.repeat(600_000) })), Buffer.from('x'.repeat(600_000))] }), status: 413, says: 'ERR - body is larger than 1048576 bytes' },
  { name: 'an unknown Content-Encoding', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-encoding': 'compress' }, body: upEvent(UNKNOWN_EUI) }), status: 415, says: 'ERR - Content-Encoding compress is not supported' },
  { name: 'a gzip body that does not inflate', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-encoding': 'gzip' }, body: upEvent(UNKNOWN_EUI) }), status: 400, says: 'ERR - body could not be read' },
  { name: 'an unknown query parameter', call: (ctx) => ({ path: hook(ctx), query: 'event=up&debug=1', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: "Unknown query parameter 'debug'" },
  { name: 'an empty event parameter', call: (ctx) => ({ path: hook(ctx), query: 'event=', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: "Empty value found for query parameter 'event'" },
  { name: 'an event parameter over its length cap', call: (ctx) => ({ path: hook(ctx), query: `event=${'u'.repeat(33)}`, headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - event must NOT have more than 32 characters' },
  { name: 'the event parameter twice', call: (ctx) => ({ path: hook(ctx), query: 'event=up&event=join', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - event' },
  { name: 'a bracketed event parameter', call: (ctx) => ({ path: hook(ctx), query: 'event[kind]=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - event' },
  { name: 'NUL in the query', call: (ctx) => ({ path: hook(ctx), query: 'event=%00', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 422, says: 'ERR - event must not contain NUL characters' },
  { name: 'nesting past 32 levels', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: nested(40) }), status: 422, says: 'is nested deeper than 32 levels' },
  { name: 'NUL in a body string', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI, { note: 'a\u0000b' }) }), status: 422, says: 'ERR - note must not contain NUL characters' },
  { name: 'a lone surrogate in a field name', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: '{"a\\ud800":1}' }), status: 422, says: 'must not contain lone UTF-16 surrogates' },
  { name: 'a field name over 256 characters', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: `{"${'k'.repeat(300)}":1}` }), status: 422, says: 'is a field name longer than 256 characters' },
  { name: 'a number past the largest double', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI, { fCnt: 1e400 }).replace('"fCnt":null', '"fCnt":1e400') }), status: 422, says: 'ERR - fCnt must be a finite number' },
  { name: 'a frame that is not base64', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI, { data: '%%%' }) }), status: 422, says: 'ERR - data' },
  { name: 'an uplink of a device the connector does not know', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 200, says: '{"stored":0}' },
  { name: "ThingPark's empty parameters", call: (ctx) => ({ path: hook(ctx), query: 'event=up&LrnInfos=&AS_ID=', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 200, says: '{"stored":0}' },
  { name: 'a percent-encoded connector id', call: (ctx) => ({ path: `/api/integrations/chirpstack/${[...ctx.connectorId].map((c) => `%${c.charCodeAt(0).toString(16)}`).join('')}`, query: 'event=up', headers: auth(ctx), body: upEvent(UNKNOWN_EUI) }), status: 200, says: '{"stored":0}' },
  { name: 'a byte-order mark before the JSON', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(upEvent(UNKNOWN_EUI))]) }), status: 200, says: '{"stored":0}' },
  { name: 'whitespace before the JSON', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: ` \r\n\t${upEvent(UNKNOWN_EUI)}` }), status: 200, says: '{"stored":0}' },
  { name: 'a body of whitespace only', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: ' \n ' }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'a byte-order mark alone', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: Buffer.from([0xef, 0xbb, 0xbf]) }), status: 422, says: 'ERR - ' },
  { name: 'a JSON number for a body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: ' 42' }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'JSON null for a body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: 'null' }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'text after the JSON', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: `${upEvent(UNKNOWN_EUI)} x` }), status: 422, says: 'ERR - body is not valid JSON' },
  { name: 'bytes that are not UTF-8 in a string', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: auth(ctx), body: Buffer.concat([Buffer.from('{"deviceInfo":{"devEui":"'), Buffer.from([0xff, 0xc3]), Buffer.from('"}}')]) }), status: 422, says: 'ERR - ' },
  { name: 'a body in chunks that split a character, with its Content-Length', call: (ctx) => {
    const text = Buffer.from(upEvent(UNKNOWN_EUI, { note: 'température °C ✓' }));
    const at = text.indexOf(Buffer.from('°')) + 1;
    return { path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-length': String(text.length) }, body: [text.subarray(0, at), text.subarray(at)] };
  }, status: 200, says: '{"stored":0}' },
  { name: 'a body in chunks, chunked', call: (ctx) => {
    const text = Buffer.from(upEvent(UNKNOWN_EUI));
    return { path: hook(ctx), query: 'event=up', headers: auth(ctx), body: [text.subarray(0, 40), text.subarray(40)] };
  }, status: 200, says: '{"stored":0}' },
  { name: 'a Content-Length of exactly 1 MiB', call: (ctx) => {
    const event = upEvent(UNKNOWN_EUI, { pad: '' });
    return { path: hook(ctx), query: 'event=up', headers: auth(ctx), body: event.replace('"pad":""', `"pad":"${'x'.repeat(1024 * 1024 - Buffer.byteLength(event))}"`) };
  }, status: 200, says: '{"stored":0}' },
  { name: 'a Content-Length of 1 MiB and a byte', call: (ctx) => {
    const event = upEvent(UNKNOWN_EUI, { pad: '' });
    return { path: hook(ctx), query: 'event=up', headers: auth(ctx), body: event.replace('"pad":""', `"pad":"${'x'.repeat(1024 * 1024 + 1 - Buffer.byteLength(event))}"`) };
  }, status: 413, says: 'ERR - body is larger than 1048576 bytes' },
  { name: 'a gzip body', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-encoding': 'gzip' }, body: gzipSync(upEvent(UNKNOWN_EUI)) }), status: 200, says: '{"stored":0}' },
  { name: 'a charset of UTF-8 named', call: (ctx) => ({ path: hook(ctx), query: 'event=up', headers: { ...auth(ctx), 'content-type': 'application/json; charset=utf-8' }, body: upEvent(UNKNOWN_EUI) }), status: 200, says: '{"stored":0}' },
  { name: 'an event ChirpStack names that the platform does not take', call: (ctx) => ({ path: hook(ctx), query: 'event=integration', headers: auth(ctx), body: upEvent(EUI) }), status: 200, says: '{"stored":0}' },
];

for (const c of CASES) {
  webhook(`when a webhook call has ${c.name}, then it is answered ${c.status}, with or without a trailing slash`, async (ctx) => {
    const { bare, slashed } = await bothWays(ctx.t, c.call(ctx));
    assert.is(bare.status, c.status, bare.text);
    assert.ok(bare.text.includes(c.says), `${bare.text} should say ${c.says}`);
    assert.equal({ status: bare.status, headers: bare.headers, text: bare.text }, { status: slashed.status, headers: slashed.headers, text: slashed.text });
    assert.match(bare.requestId ?? '', /^[0-9a-f-]{36}$/);
    assert.match(slashed.requestId ?? '', /^[0-9a-f-]{36}$/);
  });
}

webhook('when a webhook call has a wrong secret, then each refusal is logged on the connector', async ({ t, connectorId }) => {
  const refusals = async () => (await logsOf(t, connectorId)).filter((l: { message: string }) => l.message.startsWith('Webhook call refused: wrong bearer secret')).length;
  const before = await refusals();
  await bothWays(t, { path: `/api/integrations/chirpstack/${connectorId}`, query: 'event=up', headers: { ...JSON_TYPE, authorization: 'Bearer wrong' }, body: upEvent(EUI) });
  await eventually(async () => (await refusals()) === before + 2, 10_000, 'two refusals logged');
});

webhook('when an uplink comes with or without a trailing slash, then it is decoded and stored', async ({ t, connectorId, secret, deviceId }) => {
  const call = (temperature: number, path: string) =>
    send(t, { path, query: 'event=up', headers: { ...JSON_TYPE, authorization: `Bearer ${secret}` }, body: JSON.stringify({ deduplicationId: crypto.randomUUID(), deviceInfo: { devEui: EUI }, fCnt: temperature, fPort: 1, data: Buffer.from(climateHex(temperature, 40, 3000), 'hex').toString('base64') }) });
  const bare = await call(23.5, `/api/integrations/chirpstack/${connectorId}`);
  assert.is(bare.status, 200, bare.text);
  assert.is(bare.text, '{"stored":1}');
  assert.is(bare.type, 'application/json; charset=utf-8');
  await deviceWhen(t, deviceId, (d) => d.temperature === 23.5, 'the uplink without a trailing slash');
  const slashed = await call(24.5, `/api/integrations/chirpstack/${connectorId}/`);
  assert.is(slashed.text, '{"stored":1}');
  await deviceWhen(t, deviceId, (d) => d.temperature === 24.5, 'the uplink with a trailing slash');
});

webhook.run();
