import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { detectImage } from '../../domain/images/detect.js';

const detect = suite('image type detection');

const bytes = (hex: string) => Buffer.from(hex.replace(/\s/g, ''), 'hex');
const text = (s: string) => Buffer.from(s, 'utf8');
const typeOf = (b: Uint8Array) => {
  const d = detectImage(b);
  return 'type' in d ? d.type : `refused: ${d.problem}`;
};

detect('when the bytes start with a raster signature, then the type is read from them', () => {
  assert.is(typeOf(bytes('89504e470d0a1a0a 0000000d49484452')), 'image/png');
  assert.is(typeOf(bytes('ffd8ffe000104a464946')), 'image/jpeg');
  assert.is(typeOf(text('GIF89a\x01\x00\x01\x00')), 'image/gif');
  assert.is(typeOf(text('GIF87a\x01\x00\x01\x00')), 'image/gif');
  assert.is(typeOf(Buffer.concat([text('RIFF'), bytes('24000000'), text('WEBPVP8 ')])), 'image/webp');
});

detect('when the bytes are not an image, then they are refused', () => {
  assert.is(typeOf(new Uint8Array()), 'refused: is empty');
  assert.match(typeOf(text('hello, I am a PNG, trust me')), /^refused: is not an image/);
  assert.match(typeOf(text('RIFF\x00\x00\x00\x00WAVEfmt ')), /^refused: is not an image/);
  assert.match(typeOf(text('<html><body>hi</body></html>')), /^refused: is not an image/);
  assert.match(typeOf(bytes('504b0304')), /^refused: is not an image/);
  assert.match(typeOf(bytes('fffe3c0073007600')), /^refused: is not an image/);
});

detect('when an SVG is plain drawing, then it is accepted with or without an XML declaration, comments and a DOCTYPE', () => {
  assert.is(typeOf(text('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10" fill="red"/></svg>')), 'image/svg+xml');
  assert.is(
    typeOf(text('\uFEFF<?xml version="1.0" encoding="UTF-8"?>\n<!-- made by hand -->\n<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n<svg xmlns="http://www.w3.org/2000/svg"><a href="#part"><circle r="4"/></a></svg>\n')),
    'image/svg+xml',
  );
});

detect('when an SVG can run code or declare entities, then it is refused and the reason named', () => {
  const svg = (inner: string, attrs = '') => text(`<svg xmlns="http://www.w3.org/2000/svg"${attrs}>${inner}</svg>`);
  assert.is(typeOf(svg('<script>alert(1)</script>')), 'refused: is an SVG that contains a script');
  assert.is(typeOf(svg('<SCRIPT type="text/javascript">x()</SCRIPT>')), 'refused: is an SVG that contains a script');
  assert.is(typeOf(svg('', ' onload="alert(1)"')), 'refused: is an SVG that has an event-handler attribute');
  assert.is(typeOf(svg('<rect ONCLICK = "x()"/>')), 'refused: is an SVG that has an event-handler attribute');
  assert.is(typeOf(svg('<a href="javascript:alert(1)"><text>x</text></a>')), 'refused: is an SVG that has a script link');
  assert.is(typeOf(svg('<a xlink:href="java&#x09;script&#58;alert(1)">x</a>')), 'refused: is an SVG that has a script link');
  assert.is(typeOf(svg('<a href="&#106;avascript:alert(1)">x</a>')), 'refused: is an SVG that has a script link');
  assert.is(typeOf(svg('<foreignObject><div>x</div></foreignObject>')), 'refused: is an SVG that contains a foreignObject');
  assert.is(typeOf(svg('<iframe src="x"/>')), 'refused: is an SVG that embeds another document');
  assert.match(typeOf(text('<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaa">]><svg>&a;</svg>')), /^refused: /);
});

detect('when a file only pretends to be SVG, then it is not an image', () => {
  assert.match(typeOf(text('<svg><rect/>')), /^refused: is not an image/);
  assert.match(typeOf(text('<html><svg></svg></html>')), /^refused: is not an image/);
});

detect.run();
