/**
 * The library script every context evaluates once, when it is created: the
 * guards on natively looping built-ins (guards.ts), first, so that the
 * libraries take their references to the guarded methods; then lodash as `_`
 * and the `buffer` package's `Buffer`. Built from the installed packages on
 * first use and cached for the life of the process.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { GUARDS_SOURCE } from './guards.js';

const require = createRequire(import.meta.url);

let cached: string | undefined;

function source(path: string): string {
  return readFileSync(path, 'utf8');
}

/**
 * `buffer` is CommonJS with two dependencies; a three-entry module table is
 * all the bundling it needs, and keeps its `require` from ever meaning the
 * host's.
 */
function bufferScript(): string {
  const bufferPath = require.resolve('buffer/');
  const fromBuffer = createRequire(bufferPath);
  const modules: Record<string, string> = {
    buffer: source(bufferPath),
    'base64-js': source(fromBuffer.resolve('base64-js')),
    ieee754: source(fromBuffer.resolve('ieee754')),
  };
  const table = Object.entries(modules)
    .map(([id, code]) => `${JSON.stringify(id)}: function (module, exports, require) {\n${code}\n}`)
    .join(',\n');
  return `(function () {
  var factories = {\n${table}\n};
  var loaded = {};
  function load(id) {
    if (loaded[id]) return loaded[id].exports;
    if (!factories[id]) throw new Error('module not available in the sandbox: ' + id);
    var module = loaded[id] = { exports: {} };
    factories[id].call(module.exports, module, module.exports, load);
    return module.exports;
  }
  var Buffer = load('buffer').Buffer;
${HEX_FAST_PATH}
  Object.defineProperty(globalThis, 'Buffer', { value: Buffer, writable: true, configurable: true });
})();`;
}

/**
 * `Buffer.from(hex, 'hex')` is how nearly every translator starts, and the
 * package's general path (encoding checks, `parseInt` of each pair, a second
 * pass over the buffer) costs about 8 µs in this interpreter for five bytes.
 * A string of hex digits alone is looked up pair by pair in a table instead
 * (about 2 µs), giving the same buffer; anything else (other characters,
 * other encodings) takes the package's own path, so its results and errors
 * are unchanged. A trailing odd digit is ignored, as the package ignores it.
 */
const HEX_FAST_PATH = `
  var generalFrom = Buffer.from;
  // Every pair of hex digits, in either case, to its byte.
  var pairs = Object.create(null), digits = '0123456789abcdef';
  for (var b = 0; b < 256; b++) {
    var high = digits[b >> 4], low = digits[b & 15];
    pairs[high + low] = pairs[high.toUpperCase() + low] = pairs[high + low.toUpperCase()] = pairs[(high + low).toUpperCase()] = b;
  }
  var setPrototypeOf = Object.setPrototypeOf, prototype = Buffer.prototype;
  Buffer.from = function from(value, encodingOrOffset, length) {
    if (typeof value === 'string' && encodingOrOffset === 'hex') {
      var count = value.length >>> 1, bytes = new Uint8Array(count);
      for (var i = 0; i < count; i++) {
        var byte = pairs[value.substr(i * 2, 2)];
        if (byte === undefined) return generalFrom(value, encodingOrOffset, length);
        bytes[i] = byte;
      }
      setPrototypeOf(bytes, prototype);
      return bytes;
    }
    return generalFrom(value, encodingOrOffset, length);
  };`;

/** lodash's UMD sees neither `module` nor `define` and so sets `globalThis._`. */
function lodashScript(): string {
  return `${source(require.resolve('lodash/lodash.min.js'))}\n;\n${ROUNDING}`;
}

/**
 * `_.round(x, 3)` and its siblings: lodash shifts the decimal point through
 * the number's text (so that 1.005 rounds to 1.01), and wraps that in
 * argument conversions that cost more than the shift in this interpreter
 * (about 4.4 µs a call). For a finite number and a whole precision within
 * lodash's range the same shift is done directly (about 2.3 µs), with the
 * same text, so the same result; any other arguments go to lodash's own.
 */
const ROUNDING = `(function () {
  var trunc = Math.trunc;
  function text(n) { return n === 0 && 1 / n < 0 ? '-0' : '' + n; }
  function shift(n, by) {
    var s = text(n), e = s.indexOf('e');
    return e < 0 ? s + 'e' + by : s.slice(0, e) + 'e' + (+s.slice(e + 1) + by);
  }
  function exact(method, general) {
    return function (number, precision) {
      if (typeof number === 'number' && number - number === 0 && typeof precision === 'number' && precision === trunc(precision)
        && precision !== 0 && precision >= -292 && precision <= 292) {
        return +shift(method(shift(number, precision)), -precision);
      }
      return general(number, precision);
    };
  }
  _.round = exact(Math.round, _.round);
  _.floor = exact(Math.floor, _.floor);
  _.ceil = exact(Math.ceil, _.ceil);
})();`;

export function preludeSource(): string {
  cached ??= `${GUARDS_SOURCE}\n;\n${lodashScript()}\n;\n${bufferScript()}\n`;
  return cached;
}
