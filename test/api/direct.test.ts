import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type RequestListener, type Server } from 'node:http';
import { gzipSync } from 'node:zlib';
import express from 'express';
import { pino } from 'pino';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { directRoute, type DirectRoute } from '../../api/direct.js';
import { contentEncoding } from '../../api/input.js';
import { errorHandler } from '../../api/errors.js';
import { JSON_LIMIT } from '../../api/app.js';
import { loadOpenApi, type OpenApiDocument } from '../../api/openapi.js';

/**
 * Which way a request takes: the direct way in (`api/direct.ts`) for the
 * webhook operation of the real OpenAPI document, with a handler that says it
 * was reached, ahead of a small express pipeline with the platform's own body
 * steps and error handler, whose route says the same. The answers the
 * platform gives either way are compared in
 * test/integrations/webhook-way-in.test.ts.
 */

const TEMPLATE = '/api/integrations/{integration}/{connectorId}';
const ID = '0123456789abcdef01234567';
const HOOK = `/api/integrations/chirpstack/${ID}`;

interface Ctx {
  server: Server;
  base: string;
}

function listenerWith(openapi: OpenApiDocument, route: Omit<DirectRoute, 'handle'> = { method: 'POST', template: TEMPLATE }): RequestListener {
  const full = express();
  full.disable('x-powered-by');
  full.set('query parser', 'extended');
  const carried = new WeakMap<IncomingMessage, unknown>();
  full.use((req, _res, next) => next(carried.get(req)));
  full.use(contentEncoding(), express.json({ limit: JSON_LIMIT }), (req, res) => res.json({ way: 'full', body: req.body ?? null }));
  full.use(errorHandler);
  const log = pino({ level: 'silent' });
  const take = directRoute(openapi, { ...route, handle: async (call) => ({ way: 'direct', params: call.params, query: call.query, body: call.body }) }, {
    full: (req, res) => full(req as express.Request, res as express.Response),
    fail: (req, res, error) => {
      carried.set(req, error);
      full(req as express.Request, res as express.Response);
    },
    stamp: () => ({ id: 'request', log }),
    time: null,
    parseQuery: full.get('query parser fn'),
    etag: full.get('etag fn'),
    limit: JSON_LIMIT,
  });
  return (req, res) => take(req, res) || full(req as express.Request, res as express.Response);
}

const direct = suite<Ctx>('Direct way in: which requests it takes');

direct.before(async (ctx) => {
  ctx.server = createServer(listenerWith(loadOpenApi())).listen(0, '127.0.0.1');
  await new Promise((resolve) => ctx.server.once('listening', resolve));
  ctx.base = `http://127.0.0.1:${(ctx.server.address() as AddressInfo).port}`;
});
direct.after(async (ctx) => {
  await new Promise((resolve) => ctx.server.close(resolve));
});

const post = async (base: string, path: string, body: string | Buffer | ReadableStream | null, headers: Record<string, string> = { 'content-type': 'application/json' }, method = 'POST') => {
  const res = await fetch(base + path, { method, headers, body, ...(body instanceof ReadableStream ? { duplex: 'half' } : {}) } as RequestInit);
  const text = await res.text();
  return { status: res.status, text, json: res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(text) : null };
};
const EVENT = JSON.stringify({ deviceInfo: { devEui: '70b3d57ed0053a01' }, fPort: 1, data: 'AQID' });

direct('when a webhook call is valid by the document, then it comes in directly, with its parameters, query and body as sent', async ({ base }) => {
  const res = await post(base, `${HOOK}?event=up`, EVENT);
  assert.equal(res.json, { way: 'direct', params: { integration: 'chirpstack', connectorId: ID }, query: { event: 'up' }, body: JSON.parse(EVENT) });
  const thingpark = await post(base, `/api/integrations/thingpark/${ID}?LrnInfos=&AS_ID=app1`, '{}', { 'content-type': 'application/json; charset=utf-8' });
  assert.equal(thingpark.json, { way: 'direct', params: { integration: 'thingpark', connectorId: ID }, query: { LrnInfos: '', AS_ID: 'app1' }, body: {} });
});

direct('when a query is one plain pair or anything else, then the handler gets it as the pipeline\'s query parser reads it', async ({ base }) => {
  const parse = express().set('query parser', 'extended').get('query parser fn') as (text: string) => unknown;
  const searches = ['AS_ID=app.1~x-y_z', 'AS_ID=', 'AS_ID=a%2Eb', 'AS_ID=a+b', 'AS_ID=a&Time=b', 'AS_ID=a&AS_ID=b', 'Time=2026-11-24T10:00:00.000Z'];
  let directly = 0;
  for (const search of searches) {
    const res = await post(base, `/api/integrations/thingpark/${ID}?${search}`, '{}');
    assert.equal(res.status, 200, search);
    if (res.json.way !== 'direct') continue;
    directly++;
    assert.equal(res.json.query, parse(search), search);
  }
  // The plain pairs and the escaped ones alike came in directly: both readings were compared.
  assert.ok(directly >= 5, `${directly} of ${searches.length} came in directly`);
});

direct('when its body comes chunked or gzip-encoded, then it goes the full way, read by the pipeline\'s JSON step', async ({ base }) => {
  const chunked = new ReadableStream({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(EVENT.slice(0, 10)));
      controller.enqueue(new TextEncoder().encode(EVENT.slice(10)));
      controller.close();
    },
  });
  assert.equal((await post(base, `${HOOK}?event=up`, chunked)).json, { way: 'full', body: JSON.parse(EVENT) });
  assert.equal((await post(base, `${HOOK}?event=up`, gzipSync(EVENT), { 'content-type': 'application/json', 'content-encoding': 'gzip' })).json, { way: 'full', body: JSON.parse(EVENT) });
});

const FULL_WAY: [string, string, string | null, Record<string, string>?, string?][] = [
  ['a trailing slash', `${HOOK}/?event=up`, EVENT],
  ['a percent-escaped connector id', `/api/integrations/chirpstack/%30123456789abcdef01234567?event=up`, EVENT],
  ['an upper-case path', `/API/integrations/chirpstack/${ID}?event=up`, EVENT],
  ['a connector id that is no id', '/api/integrations/chirpstack/not-an-id?event=up', EVENT],
  ['an integration the document does not list', `/api/integrations/nope/${ID}`, EVENT],
  ['an unknown query parameter', `${HOOK}?event=up&debug=1`, EVENT],
  ['an empty parameter that may not be empty', `${HOOK}?event=`, EVENT],
  ['a parameter over its length cap', `${HOOK}?event=${'u'.repeat(33)}`, EVENT],
  ['a parameter given twice', `${HOOK}?event=up&event=join`, EVENT],
  ['NUL in the query', `${HOOK}?event=%00`, EVENT],
  ['another way to write the media type', `${HOOK}?event=up`, EVENT, { 'content-type': 'application/json;charset=UTF-8' }],
  ['no media type', `${HOOK}?event=up`, EVENT, {}],
  ['a body that is an array', `${HOOK}?event=up`, '[1]'],
  ['a body nested past 32 levels', `${HOOK}?event=up`, `${'{"a":'.repeat(33)}1${'}'.repeat(33)}`],
  ['a lone surrogate in the body', `${HOOK}?event=up`, '{"a":"\\ud800"}'],
  ['another method', `${HOOK}?event=up`, EVENT, undefined, 'PUT'],
];

for (const [what, path, body, headers, method] of FULL_WAY) {
  direct(`when a webhook call has ${what}, then it goes the full way, its body read once`, async ({ base }) => {
    const res = await post(base, path, body, headers, method);
    assert.is(res.json?.way, 'full', res.text);
    const json = /json/.test((headers ?? { 'content-type': 'application/json' })['content-type'] ?? '');
    assert.equal(res.json.body, json && body ? JSON.parse(body) : null);
  });
}

direct('when a body is too large, does not parse or has an unknown encoding, then the one error handler answers, as for any request', async ({ base }) => {
  const big = await post(base, `${HOOK}?event=up`, JSON.stringify({ pad: 'x'.repeat(JSON_LIMIT) }));
  assert.equal([big.status, big.text], [413, `ERR - body is larger than ${JSON_LIMIT} bytes`]);
  const broken = await post(base, `${HOOK}?event=up`, '{"a":');
  assert.equal([broken.status, broken.text], [422, 'ERR - body is not valid JSON']);
  const scalar = await post(base, `${HOOK}?event=up`, '"up"');
  assert.equal([scalar.status, scalar.text], [422, 'ERR - body is not valid JSON']);
  const encoded = await post(base, `${HOOK}?event=up`, EVENT, { 'content-type': 'application/json', 'content-encoding': 'compress' });
  assert.equal([encoded.status, encoded.text], [415, 'ERR - Content-Encoding compress is not supported; send the body as identity, gzip, deflate, br']);
});

const refusal = suite('Direct way in: operations it cannot take, refused at start');

const changed = (edit: (operation: Record<string, any>, doc: OpenApiDocument) => void): OpenApiDocument => {
  const doc = structuredClone(loadOpenApi());
  edit(doc.paths[TEMPLATE]!.post as Record<string, any>, doc);
  return doc;
};

const REFUSED: [string, OpenApiDocument, string][] = [
  ['deprecated', changed((op) => (op.deprecated = true)), 'it is deprecated'],
  ['for signed-in users', changed((op) => (op.security = [{ bearer: [] }])), 'it is not public'],
  ['under the role check', changed((op) => (op['x-resource'] = 'connector')), 'it has an x-resource'],
  ['with a header parameter', changed((op) => op.parameters.push({ name: 'X-Signature', in: 'header', schema: { type: 'string' } })), 'header or cookie parameters'],
  ['with a form body', changed((op) => (op.requestBody.content = { 'multipart/form-data': { schema: { type: 'object' } } })), 'its body is not JSON alone'],
  ['with a read-only body property', changed((op) => (op.requestBody.content['application/json'].schema = { type: 'object', properties: { id: { type: 'string', readOnly: true } } })), 'readOnly'],
  ['beside an operation on some of its paths', changed((_op, doc) => (doc.paths['/api/integrations/chirpstack/{id}'] = { post: { security: [], responses: {} } })), '/api/integrations/chirpstack/{id} takes some of its paths'],
];

for (const [what, doc, why] of REFUSED) {
  refusal(`when the webhook operation is ${what}, then it cannot come in directly, and the platform does not start`, () => {
    assert.throws(() => listenerWith(doc), (error: Error) => error.message.includes('cannot come in directly') && error.message.includes(why));
  });
}

refusal('when a direct route names an operation the document does not have, then it is refused at start', () => {
  assert.throws(() => listenerWith(loadOpenApi(), { method: 'POST', template: '/api/integrations/{integration}' }), /the OpenAPI document has no such operation/);
});

direct.run();
refusal.run();
