/**
 * The authorization matrix of the rules routes: the role check (which
 * methods each role allows on `rule`) and the object check (rights on the
 * rule itself, and on what its definition names).
 */
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser, type GivenUser } from '../users/given.js';
import { button, deviceNow, edge, givenDevice, givenRule, logged, setField } from './given.js';
import { eventually } from '../ingest/support.js';

interface Ctx {
  t: TestPlatform;
  editor: GivenUser;
  viewer: GivenUser;
  maker: GivenUser;
  rule: Record<string, any>;
}

const matrix = suite<Ctx>('rules v2: roles and access rights');

matrix.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  const all = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];
  assert.is((await ctx.t.call('POST', '/api/roles', { body: { name: 'ruleMaker', permissions: { rule: all, device: all, accessRight: all, log: ['GET'] } } })).status, 201);
  ctx.editor = await givenUser(ctx.t, 'rule-editor', { attributes: { roles: ['editor'] } });
  ctx.viewer = await givenUser(ctx.t, 'rule-viewer', { attributes: { roles: ['viewerBasic'] } });
  ctx.maker = await givenUser(ctx.t, 'rule-maker', { attributes: { roles: ['ruleMaker'] } });
  const valve = await givenDevice(ctx.t, 'valve');
  ctx.rule = await givenRule(ctx.t, 'valve.open', [button(), setField('open', valve._id, 'open', true)], [edge('press', 'open')]);
});
matrix.after(async ({ t }) => t.stop());

const body = (deviceId: string) => ({ name: 'r', definition: { nodes: [button(), setField('a', deviceId, 'x', 1)], edges: [edge('press', 'a')] } });
const grant = (t: TestPlatform, resourceType: string, resourceId: string, user: GivenUser, scope: string[]) =>
  t.call('POST', '/api/access-rights', { body: { resourceType, resourceId, subjectType: 'singleton', subjectId: user.id, scope } });

matrix('the role check: viewers only read, editors read and replace, neither creates, deletes nor executes', async ({ t, editor, viewer, rule }) => {
  const device = await givenDevice(t, 'd');
  const routes: [string, string, unknown?][] = [
    ['GET', '/api/rules-v2'],
    ['GET', `/api/rules-v2/${rule._id}`],
    ['POST', '/api/rules-v2', body(device._id)],
    ['PUT', `/api/rules-v2/${rule._id}`, body(device._id)],
    ['DELETE', `/api/rules-v2/${rule._id}`],
    ['POST', `/api/rules-v2/${rule._id}/execute`, { triggerNodeId: 'press' }],
  ];
  const expected: Record<string, Record<string, number>> = {
    viewer: { GET: 200, POST: 403, PUT: 403, DELETE: 403 },
    editor: { GET: 200, POST: 403, PUT: 404, DELETE: 403 },
  };
  for (const [who, user] of [['viewer', viewer], ['editor', editor]] as const) {
    for (const [method, path, payload] of routes) {
      const res = await t.call(method, path, { token: user.token, ...(payload ? { body: payload } : {}) });
      // A GET of one rule the user holds no right on is 404; an editor's PUT passes the role check and then finds no right (404).
      const want = method === 'GET' && path !== '/api/rules-v2' ? 404 : expected[who]![method]!;
      assert.is(res.status, want, `${who} ${method} ${path}: ${res.text}`);
      if (res.status === 403 && method !== 'PUT') assert.is(res.text, 'Forbidden');
    }
  }
  const list = await t.call('GET', '/api/rules-v2?options=count', { token: viewer.token });
  assert.equal([list.body, list.headers.get('x-total-count')], [[], '0']);
});

matrix('the object check: read shows the rule and counts it, write changes and executes it; none is 404', async ({ t, maker, rule }) => {
  const other = await givenUser(t, 'rule-maker-2', { attributes: { roles: ['ruleMaker'] } });
  const execute = (u: GivenUser) => t.call('POST', `/api/rules-v2/${rule._id}/execute`, { token: u.token, body: { triggerNodeId: 'press' } });
  assert.is((await t.call('GET', `/api/rules-v2/${rule._id}`, { token: other.token })).status, 404);
  assert.is((await execute(other)).status, 404);
  assert.is((await grant(t, 'ruleV2', rule._id, other, ['read'])).status, 201);
  assert.is((await t.call('GET', `/api/rules-v2/${rule._id}`, { token: other.token })).status, 200);
  assert.is((await t.call('GET', '/api/rules-v2?options=count', { token: other.token })).headers.get('x-total-count'), '1');
  assert.is((await execute(other)).status, 403);
  assert.is((await t.call('DELETE', `/api/rules-v2/${rule._id}`, { token: other.token })).status, 403);
  assert.is((await t.call('PUT', `/api/rules-v2/${rule._id}`, { token: other.token, body: rule })).status, 422, 'the body is checked before the object');
  assert.is((await grant(t, 'ruleV2', rule._id, other, ['read', 'write'])).status, 201);
  assert.is((await execute(other)).status, 202);
  assert.is((await t.call('GET', '/api/logs?resourceId=' + rule._id, { token: maker.token })).body.logs.length, 0, 'a stranger sees none of its log');
});

matrix('what a definition names needs the writer\'s own rights: unreadable is 422 as if missing, read-only is 403', async ({ t, maker }) => {
  const mine = await givenDevice(t, 'mine', {}, maker.token);
  const theirs = await givenDevice(t, 'theirs');
  const unreadable = await t.call('POST', '/api/rules-v2', { token: maker.token, body: body(theirs._id) });
  assert.is(unreadable.status, 422);
  assert.match(unreadable.text, /^ERR - definition\.nodes\.1\.config\.iotnodeId names no iotnode you can read/);
  await grant(t, 'device', theirs._id, maker, ['read']);
  const readOnly = await t.call('POST', '/api/rules-v2', { token: maker.token, body: body(theirs._id) });
  assert.is(readOnly.status, 403);
  assert.match(readOnly.text, /which you may read but not change/);
  assert.is((await t.call('POST', '/api/rules-v2', { token: maker.token, body: body(mine._id) })).status, 201);
});

matrix('a rule runs with its owner\'s rights: an action on a device the owner can no longer write fails and is logged on the rule', async ({ t, maker }) => {
  const shared = await givenDevice(t, 'shared');
  await grant(t, 'device', shared._id, maker, ['read', 'write']);
  const rule = await givenRule(t, 'shared.set', [button(), setField('set', shared._id, 'state', 'on')], [edge('press', 'set')], maker.token);
  const press = () => t.call('POST', `/api/rules-v2/${rule._id}/execute`, { token: maker.token, body: { triggerNodeId: 'press' } });
  assert.is((await press()).status, 202);
  await eventually(async () => (await deviceNow(t, shared._id)).state === 'on', 10_000, 'the first run');
  await t.call('DELETE', '/api/access-rights', { body: { resourceType: 'device', resourceId: shared._id, subjectType: 'singleton', subjectId: maker.id, scope: ['write'] } });
  await t.call('PUT', `/api/iotnodes/${shared._id}`, { body: { state: 'off' } });
  assert.is((await press()).status, 202);
  const failure = await logged(t, rule._id, /action 'set' \(setField\) failed: the rule's owner may not change iotnode/, 10_000, maker.token);
  assert.equal([failure.type, failure.priority], ['error', 'high']);
  assert.is((await deviceNow(t, shared._id)).state, 'off');
});

matrix.run();
