import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { parseGeoquery } from '../../domain/geofences/geoquery.js';
import { ValidationError } from '../../domain/shared/errors.js';

const parse = suite('geoquery parsing');

const fails = (text: string, pattern: RegExp) => {
  try {
    parseGeoquery(text);
  } catch (error) {
    assert.instance(error, ValidationError);
    assert.match((error as Error).message, /^ERR - geoquery/);
    assert.match((error as Error).message, pattern);
    return;
  }
  assert.unreachable(`${text} was accepted`);
};

parse('when the contains form is given, then the ring is returned as parsed', () => {
  assert.equal(parseGeoquery('type:contains;coordinates=[[0,0],[1,0],[1,1],[0,0]]'), { kind: 'contains', ring: [[0, 0], [1, 0], [1, 1], [0, 0]] });
});

parse('when parts come in another order or with either separator, then it parses the same', () => {
  const expected = { kind: 'contains', ring: [[0, 0], [1, 0], [1, 1], [0, 0]] };
  assert.equal(parseGeoquery('coordinates=[[0,0],[1,0],[1,1],[0,0]];type:contains'), expected);
  assert.equal(parseGeoquery('type=contains;coordinates:[[0,0],[1,0],[1,1],[0,0]]'), expected);
});

parse('when the id form is given, then the fence id is returned', () => {
  assert.equal(parseGeoquery(`id:${'ab'.repeat(12)}`), { kind: 'fence', id: 'ab'.repeat(12) });
});

parse('when the type is not contains, then 422 says only contains is supported', () => {
  fails('type:within;coordinates=[[0,0],[1,0],[1,1],[0,0]]', /type 'within' is not supported; only type:contains/);
  fails('type:intersects;coordinates=[[0,0],[1,0],[1,1],[0,0]]', /only type:contains/);
});

parse('when the coordinates are a point or a multipolygon, then 422 says only polygons are supported', () => {
  fails('type:contains;coordinates=[1,2]', /only polygons are supported/);
  fails('type:contains;coordinates=[[[0,0],[1,0],[1,1],[0,0]]]', /only polygons are supported/);
  fails('type:contains;coordinates={"type":"Point"}', /only polygons are supported/);
});

parse('when the syntax is broken, then 422 names the supported forms', () => {
  fails('', /needs a type; supported forms are type:contains;coordinates=\[\[lng,lat\],\.\.\.\] or id:<geofence_id>/);
  fails('contains', /is not name:value/);
  fails('shape:circle', /'shape' is not supported/);
  fails('type:contains', /needs coordinates/);
  fails('type:contains;coordinates=[[0,0],[1,0]', /not valid JSON/);
  fails('type:contains;coordinates=[[NaN,0],[1,0],[1,1],[NaN,0]]', /not valid JSON/);
  fails('type:contains;type:contains;coordinates=[]', /twice/);
  fails('id:nope', /is not a geofence id/);
  fails(`id:${'ab'.repeat(12)};type:contains`, /stands alone/);
});

parse.run();
