/**
 * The library script every context evaluates once, when it is created:
 * lodash as `_` and the `buffer` package's `Buffer`. Built from the installed
 * packages on first use and cached for the life of the process.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

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
  Object.defineProperty(globalThis, 'Buffer', { value: load('buffer').Buffer, writable: true, configurable: true });
})();`;
}

/** lodash's UMD sees neither `module` nor `define` and so sets `globalThis._`. */
function lodashScript(): string {
  return source(require.resolve('lodash/lodash.min.js'));
}

export function preludeSource(): string {
  cached ??= `${lodashScript()}\n;\n${bufferScript()}\n`;
  return cached;
}
