import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { pino } from 'pino';
import { rebuild } from '../../projections/rebuild.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventually } from '../ingest/support.js';
import { whileLocked } from '../support/locked.js';

/** An image's bytes leave with its deletion event, however the request that stored it ended. */
const deletion = suite<{ t: TestPlatform }>('images: deleting the bytes');

deletion.before(async (ctx) => {
  // A short wait for the read models, so a deletion they have not applied yet answers 503 soon.
  ctx.t = await startTestPlatform({ projectionWaitMs: 200 });
});
deletion.after(async (ctx) => {
  await ctx.t.stop();
});

const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000a49444154789c6300010000050001', 'hex');

async function uploaded(t: TestPlatform): Promise<string> {
  const form = new FormData();
  form.append('name', 'Cellar');
  form.append('category', 'floorPlan');
  form.append('image', new Blob([PNG], { type: 'image/png' }), 'cellar.png');
  const res = await fetch(`${t.baseUrl}/api/images`, { method: 'POST', headers: { authorization: `Bearer ${t.adminToken}` }, body: form });
  assert.is(res.status, 201, await res.clone().text());
  return ((await res.json()) as { _id: string })._id;
}

/** Runs `during` while another transaction holds the `images` table, so the read models cannot apply an image's events; then lets them. */
const whileImagesHeld = <T>(t: TestPlatform, during: () => Promise<T>): Promise<T> => whileLocked(t.platform.deps.db, 'images', during);

const blobsOf = async (t: TestPlatform, id: string) => (await t.platform.deps.db.selectFrom('image_blobs').select('image_id').where('image_id', '=', id).execute()).length;

deletion('given an image, when its deletion is stored but answered 503 (the read models behind), then once they apply it its bytes are gone, and a second DELETE is 404', async ({ t }) => {
  const id = await uploaded(t);
  assert.is(await blobsOf(t, id), 1);
  const answer = await whileImagesHeld(t, () => t.call('DELETE', `/api/images/${id}`));
  assert.is(answer.status, 503, answer.text);
  await eventually(async () => (await t.platform.deps.db.selectFrom('images').select('id').where('id', '=', id).executeTakeFirst()) === undefined, 10_000, 'the image gone from the read model');
  assert.is(await blobsOf(t, id), 0, 'the bytes are gone with it');
  assert.is((await t.call('DELETE', `/api/images/${id}`)).status, 404);
});

deletion('given an image, when it is deleted, then 204 and its bytes are gone', async ({ t }) => {
  const id = await uploaded(t);
  assert.is((await t.call('DELETE', `/api/images/${id}`)).status, 204);
  assert.is(await blobsOf(t, id), 0);
});

deletion('given bytes a deletion left behind before the projection removed them, when the images read model is rebuilt, then they are gone, and a live image keeps its own', async ({ t }) => {
  const deleted = await uploaded(t);
  const kept = await uploaded(t);
  const [bytes] = await t.platform.deps.db.selectFrom('image_blobs').selectAll().where('image_id', '=', deleted).execute();
  assert.is((await t.call('DELETE', `/api/images/${deleted}`)).status, 204);
  // What a deletion stored by an earlier version, which removed the bytes after its event, could leave.
  await t.platform.deps.db.insertInto('image_blobs').values({ image_id: deleted, sha256: bytes!.sha256, bytes: bytes!.bytes }).execute();
  await rebuild(t.platform.deps.store, t.platform.deps.db, pino({ level: 'silent' }), { names: ['images'] });
  assert.equal([await blobsOf(t, deleted), await blobsOf(t, kept)], [0, 1]);
  assert.is((await fetch(`${t.baseUrl}/api/images/${kept}`, { headers: { authorization: `Bearer ${t.adminToken}` } })).status, 200);
});

deletion.run();
