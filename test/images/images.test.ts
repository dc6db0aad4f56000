import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventCount, givenUser, type GivenUser } from '../users/given.js';

const images = suite<{ t: TestPlatform; viewer: GivenUser; editor: GivenUser }>('images REST');

images.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  ctx.viewer = await givenUser(ctx.t, 'image-viewer', { attributes: { roles: ['viewerBasic'] } });
  ctx.editor = await givenUser(ctx.t, 'image-editor', { attributes: { roles: ['editor'] } });
});
images.after(async (ctx) => {
  await ctx.t.stop();
});

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000a49444154789c6300010000050001', 'hex');
const SVG = Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>');

interface Upload {
  status: number;
  text: string;
  body: any;
}

async function upload(t: TestPlatform, fields: { name?: string; category?: string; file?: Buffer; fileField?: string; declared?: string }, token = t.adminToken): Promise<Upload> {
  const form = new FormData();
  if (fields.name !== undefined) form.append('name', fields.name);
  if (fields.category !== undefined) form.append('category', fields.category);
  if (fields.file) form.append(fields.fileField ?? 'image', new Blob([fields.file], { type: fields.declared ?? 'application/octet-stream' }), 'upload.bin');
  const res = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const text = await res.text();
  return { status: res.status, text, body: res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text };
}

images('when a PNG is uploaded, then 201 returns the record with _id, and GET returns the same bytes with its content type and nosniff', async ({ t }) => {
  const res = await upload(t, { name: 'Boiler room', category: 'floorPlan', file: PNG });
  assert.is(res.status, 201, res.text);
  assert.match(res.body._id, /^[0-9a-f]{24}$/);
  assert.equal([res.body.name, res.body.category, res.body.contentType, res.body.size], ['Boiler room', 'floorPlan', 'image/png', PNG.length]);
  const got = await fetch(`${t.baseUrl}/api/images/${res.body._id}`, { headers: { authorization: `Bearer ${t.adminToken}` } });
  assert.is(got.status, 200);
  assert.is(got.headers.get('content-type'), 'image/png');
  assert.is(got.headers.get('x-content-type-options'), 'nosniff');
  assert.ok(Buffer.from(await got.arrayBuffer()).equals(PNG));
});

images('when an SVG is uploaded, then it is served as image/svg+xml under a policy that forbids scripts', async ({ t }) => {
  const res = await upload(t, { name: 'Icon', category: 'widget', file: SVG });
  assert.is(res.status, 201, res.text);
  assert.is(res.body.contentType, 'image/svg+xml');
  const got = await fetch(`${t.baseUrl}/api/images/${res.body._id}`, { headers: { authorization: `Bearer ${t.adminToken}` } });
  assert.is(got.headers.get('content-type'), 'image/svg+xml');
  assert.match(got.headers.get('content-security-policy') ?? '', /default-src 'none'/);
  assert.match(got.headers.get('content-security-policy') ?? '', /sandbox/);
});

images('when the file is not an image, whatever it claims to be, then 422 and nothing is stored', async ({ t }) => {
  const events = await eventCount(t);
  const blobs = async () => (await t.platform.deps.db.selectFrom('image_blobs').select('image_id').execute()).length;
  const before = await blobs();
  const res = await upload(t, { name: 'Fake', category: 'widget', file: Buffer.from('MZ\x90\x00 not a picture'), declared: 'image/png' });
  assert.is(res.status, 422);
  assert.match(res.text, /^ERR - image is not an image/);
  const script = await upload(t, { name: 'Evil', category: 'widget', file: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"></svg>') });
  assert.is(script.status, 422);
  assert.is(script.text, 'ERR - image is an SVG that has an event-handler attribute');
  assert.is(await eventCount(t), events);
  assert.is(await blobs(), before);
});

images('when a form field breaks its rule, then 422 names it', async ({ t }) => {
  const cases: [Parameters<typeof upload>[1], RegExp][] = [
    [{ name: 'ab', category: 'widget', file: PNG }, /^ERR - name /],
    [{ name: 'x'.repeat(257), category: 'widget', file: PNG }, /^ERR - name /],
    [{ category: 'widget', file: PNG }, /^ERR - name /],
    [{ name: 'Plan', category: 'poster', file: PNG }, /^ERR - category /],
    [{ name: 'Plan', file: PNG }, /^ERR - category /],
    [{ name: 'Plan', category: 'widget' }, /^ERR - image /],
    [{ name: 'Plan', category: 'widget', file: PNG, fileField: 'picture' }, /^ERR - picture /],
  ];
  for (const [fields, message] of cases) {
    const res = await upload(t, fields);
    assert.is(res.status, 422, `${JSON.stringify({ ...fields, file: undefined })}: ${res.text}`);
    assert.match(res.text, message);
  }
  assert.is((await upload(t, { name: 'abc', category: 'mapOverlay', file: PNG })).status, 201);
  assert.is((await upload(t, { name: 'x'.repeat(256), category: 'widget', file: PNG })).status, 201);
});

images('when the file is larger than 10 MiB, then 413', async ({ t }) => {
  const big = Buffer.alloc(10 * 1024 * 1024 + 1);
  PNG.copy(big);
  const res = await upload(t, { name: 'Huge', category: 'widget', file: big });
  assert.is(res.status, 413);
  assert.match(res.text, /^ERR - image is larger than/);
});

images('when an image is uploaded, then the event log points at the bytes and does not hold them', async ({ t }) => {
  const res = await upload(t, { name: 'Stored', category: 'widget', file: PNG });
  const [event] = await t.platform.deps.store.readStream(`image-${res.body._id}`);
  assert.is(event!.type, 'ImageUploaded');
  const data = event!.data as Record<string, unknown>;
  assert.match(String(data.sha256), /^[0-9a-f]{64}$/);
  assert.ok(JSON.stringify(data).length < 500);
  const blob = await t.platform.deps.db.selectFrom('image_blobs').selectAll().where('image_id', '=', res.body._id).executeTakeFirstOrThrow();
  assert.is(blob.sha256, data.sha256);
  assert.ok(blob.bytes.equals(PNG));
});

images('when images are listed, then each caller sees only the images it can read', async ({ t, viewer }) => {
  const res = await upload(t, { name: 'Private', category: 'widget', file: PNG });
  const mine = await t.call('GET', '/api/images');
  assert.is(mine.status, 200);
  assert.ok(mine.body.some((i: any) => i._id === res.body._id));
  const theirs = await t.call('GET', '/api/images', { token: viewer.token });
  assert.is(theirs.status, 200);
  assert.not.ok(theirs.body.some((i: any) => i._id === res.body._id));
  assert.is((await t.call('GET', `/api/images/${res.body._id}`, { token: viewer.token })).status, 404);
});

images('when an image is shared for reading, then the reader can fetch it but not delete it', async ({ t, viewer }) => {
  const res = await upload(t, { name: 'Shared', category: 'widget', file: PNG });
  const grant = await t.call('POST', '/api/access-rights', { body: { resourceType: 'image', resourceId: res.body._id, subjectType: 'singleton', subjectId: viewer.id, scope: ['read'] } });
  assert.is(grant.status, 201, grant.text);
  assert.is((await t.call('GET', `/api/images/${res.body._id}`, { token: viewer.token })).status, 200);
  assert.ok((await t.call('GET', '/api/images', { token: viewer.token })).body.some((i: any) => i._id === res.body._id));
  // The viewer role allows no DELETE at all.
  assert.is((await t.call('DELETE', `/api/images/${res.body._id}`, { token: viewer.token })).status, 403);
});

images('when an editor or a viewer uploads, then 403 Forbidden, as their roles allow no POST', async ({ t, viewer, editor }) => {
  for (const user of [viewer, editor]) {
    const res = await upload(t, { name: 'Nope', category: 'widget', file: PNG }, user.token);
    assert.is(res.status, 403);
    assert.is(res.text, 'Forbidden');
  }
});

images('when an image is deleted, then 204, its bytes and record are gone, and it is no longer listed', async ({ t }) => {
  const res = await upload(t, { name: 'Temporary', category: 'widget', file: PNG });
  const del = await t.call('DELETE', `/api/images/${res.body._id}`);
  assert.is(del.status, 204);
  assert.is((await t.call('GET', `/api/images/${res.body._id}`)).status, 404);
  assert.not.ok((await t.call('GET', '/api/images')).body.some((i: any) => i._id === res.body._id));
  assert.not.ok(await t.platform.deps.db.selectFrom('image_blobs').select('image_id').where('image_id', '=', res.body._id).executeTakeFirst());
  assert.is((await t.call('DELETE', `/api/images/${res.body._id}`)).status, 404);
});

images('when the caller has no token, then 401 before any body is read', async ({ t }) => {
  const res = await upload(t, { name: 'Anon', category: 'widget', file: PNG }, '');
  assert.is(res.status, 401);
  assert.is((await t.call('GET', '/api/images', { token: null })).status, 401);
});

images('when an image id has the wrong shape, then 4xx', async ({ t }) => {
  const res = await t.call('GET', '/api/images/not-an-id');
  assert.ok(res.status >= 400 && res.status < 500, String(res.status));
});

images('when the form is not multipart at all, then 4xx and never 500', async ({ t }) => {
  const json = await t.call('POST', '/api/images', { body: { name: 'Plan', category: 'widget', image: 'aGVsbG8=' } });
  assert.ok(json.status >= 400 && json.status < 500, `${json.status} ${json.text}`);
  const cut = await fetch(`${t.baseUrl}/api/images`, {
    method: 'POST',
    headers: { authorization: `Bearer ${t.adminToken}`, 'content-type': 'multipart/form-data; boundary=XYZ' },
    body: '--XYZ\r\nContent-Disposition: form-data; name="name"\r\n\r\nPlan\r\n--XYZ\r\nContent-Disposition: form-data; name="image"; filename="a.png"\r\n\r\n\x89PNG',
  });
  assert.ok(cut.status >= 400 && cut.status < 500, `${cut.status} ${await cut.text()}`);
});

images.run();
