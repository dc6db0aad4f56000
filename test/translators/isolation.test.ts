import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { givenUser } from '../users/given.js';
import { givenTranslator } from './given.js';

/**
 * One translator version serves every device that uses it, whoever owns it,
 * from the same warm contexts: nothing one device's uplink does may reach the
 * next device's decoding.
 */
const isolation = suite<{ t: TestPlatform; mine: string; theirs: string; token: string }>('Translators at ingest: nothing carries over from one device to the next');

const LEAKY = `
let uplinks = 0;
var lastPort;
function translate({ encodedData }) {
  uplinks++;
  var seen = {
    uplinks: uplinks,
    previousPort: String(lastPort),
    globalNote: String(globalThis.note),
    lodashLeak: typeof _.leak,
    arrayLeak: typeof [].leak,
  };
  lastPort = encodedData.port;
  globalThis.note = 'device on port ' + encodedData.port;
  try { _.leak = function () {}; } catch (e) {}
  try { Array.prototype.leak = 1; } catch (e) {}
  return { result: seen };
}
`;

isolation.before(async (ctx) => {
  ctx.t = await startTestPlatform();
  await givenTranslator(ctx.t, {
    name: 'leaky',
    match: {},
    spec: { uplinks: 'number', previousPort: 'string', globalNote: 'string', lodashLeak: 'string', arrayLeak: 'string' },
    code: LEAKY,
  });
  const preferences = [{ name: 'leaky', version: '1.0.0', upgradePolicy: 'none' }];
  const mine = await ctx.t.call('POST', '/api/iotnodes', { body: { name: 'mine', translatorPreferences: preferences } });
  const other = await givenUser(ctx.t, 'isolation-neighbour', { attributes: { roles: ['installer'] } });
  const theirs = await ctx.t.call('POST', '/api/iotnodes', { token: other.token, body: { name: 'theirs', translatorPreferences: preferences } });
  assert.is(theirs.status, 201, theirs.text);
  ctx.mine = mine.body._id;
  ctx.theirs = theirs.body._id;
  ctx.token = other.token;
});
isolation.after(async (ctx) => {
  await ctx.t.stop();
});

const fresh = { uplinks: 1, previousPort: 'undefined', globalNote: 'undefined', lodashLeak: 'undefined', arrayLeak: 'undefined' };

isolation('given a translator keeping a counter, a last value, a global, and changes to _ and Array.prototype, when devices of two owners send uplinks in turn, then every decoding starts from the same state', async ({ t, mine, theirs, token }) => {
  const send = async (device: string, port: number, as?: string) => {
    const res = await t.call('POST', `/api/iotnodes/${device}/uplinks`, { ...(as ? { token: as } : {}), body: { encodedData: { hexEncoded: '00', port } } });
    assert.is(res.status, 200, res.text);
    return Object.fromEntries(Object.keys(fresh).map((k) => [k, res.body[k]]));
  };
  assert.equal(await send(mine, 1), fresh);
  assert.equal(await send(theirs, 2, token), fresh, 'the other owner’s device sees nothing of the first call');
  assert.equal(await send(mine, 3), fresh, 'nor does the same device’s next uplink');
});

isolation.run();
