/**
 * The script every context evaluates before the uploaded code. It installs a
 * capturing `console` and returns the two functions the host calls. It is
 * plain JavaScript inside the sandbox: the host lends the context no function
 * of its own, so there is nothing host-side for translator code to reach.
 *
 * Calls cross as one JSON string each way. The envelope coming back is
 *   {ok, nonFinite?, logs?} | {threw, logs} | {unserializable, logs} | {returnedType, logs}
 * and is validated by the host as untrusted data: the translator shares this
 * realm and can tamper with anything here except the captured built-ins.
 */

export const MAX_LOG_LINES = 100;
export const MAX_LOG_LINE_LENGTH = 1000;
export const MAX_LOG_CHARS = 16 * 1024;

export interface ThrownError {
  name: string;
  message: string;
  stack: string;
}

export const HARNESS_SOURCE = String.raw`(function () {
  'use strict';
  // Captured before the translator runs, so overriding them later cannot
  // change how results and errors are encoded.
  var global = globalThis;
  var stringify = JSON.stringify, parse = JSON.parse;
  var isArray = Array.isArray, keys = Object.keys, defineProperty = Object.defineProperty;
  var isFinite = Number.isFinite, toString = String, ErrorCtor = Error, PromiseCtor = Promise;
  var MAX_LINES = ${MAX_LOG_LINES}, MAX_LINE = ${MAX_LOG_LINE_LENGTH}, MAX_CHARS = ${MAX_LOG_CHARS};

  var logs = [], chars = 0, dropped = 0;

  function show(value) {
    if (typeof value === 'string') return value;
    try {
      if (value instanceof ErrorCtor) return toString(value.name) + ': ' + toString(value.message);
      var json = stringify(value);
      if (json !== undefined) return json;
    } catch (e) {}
    try { return toString(value); } catch (e) { return '[unprintable]'; }
  }

  function log() {
    if (logs.length >= MAX_LINES || chars >= MAX_CHARS) { dropped++; return; }
    var line = '';
    for (var i = 0; i < arguments.length; i++) {
      line += (i > 0 ? ' ' : '') + show(arguments[i]);
      if (line.length > MAX_LINE) break;
    }
    if (line.length > MAX_LINE) line = line.substring(0, MAX_LINE) + '…';
    logs[logs.length] = line;
    chars += line.length;
  }

  function takeLogs() {
    var taken = logs;
    if (dropped > 0) taken[taken.length] = '… ' + dropped + ' more log lines dropped';
    logs = []; chars = 0; dropped = 0;
    return taken;
  }

  defineProperty(global, 'console', {
    value: { log: log, info: log, warn: log, error: log, debug: log },
    writable: true, configurable: true, enumerable: false,
  });

  function describe(error) {
    try {
      if (error instanceof ErrorCtor) {
        return {
          name: toString(error.name),
          message: toString(error.message),
          stack: typeof error.stack === 'string' ? error.stack : '',
        };
      }
      return { name: 'Thrown value', message: show(error), stack: '' };
    } catch (e) {
      return { name: 'Error', message: 'an error that could not be described', stack: '' };
    }
  }

  // NaN and undefined cannot cross as JSON, and the contract removes them from
  // results; infinities are reported back so the host can name the key.
  var nonFinite;
  function clean(fields, prefix) {
    if (fields === null || typeof fields !== 'object' || isArray(fields)) return fields;
    var names = keys(fields), i, value;
    for (i = 0; i < names.length; i++) {
      value = fields[names[i]];
      if (value === undefined || (typeof value === 'number' && !isFinite(value))) break;
    }
    // The common case: nothing to drop, so no copy.
    if (i === names.length) return fields;
    var out = {};
    for (i = 0; i < names.length; i++) {
      var name = names[i];
      value = fields[name];
      if (value === undefined || value !== value) continue;
      if (typeof value === 'number' && !isFinite(value)) {
        if (!nonFinite) nonFinite = [];
        nonFinite[nonFinite.length] = { path: prefix + name, value: value > 0 ? 'Infinity' : '-Infinity' };
        continue;
      }
      put(out, name, value);
    }
    return out;
  }

  // Plain assignment to a key named __proto__ would set the prototype instead.
  function put(target, name, value) {
    if (name === '__proto__') defineProperty(target, name, { value: value, enumerable: true, writable: true, configurable: true });
    else target[name] = value;
  }

  function cleanReturn(returned) {
    var out = {}, names = keys(returned);
    for (var i = 0; i < names.length; i++) {
      var name = names[i], value = returned[name];
      if (name === 'result') value = clean(value, '');
      else if (name === 'additionalDeviceUpdates' && isArray(value)) {
        var updates = [];
        for (var j = 0; j < value.length; j++) {
          var update = value[j];
          if (update !== null && typeof update === 'object' && !isArray(update)) {
            var copy = {}, updateKeys = keys(update);
            for (var k = 0; k < updateKeys.length; k++) {
              var key = updateKeys[k];
              put(copy, key, key === 'result' ? clean(update[key], 'additionalDeviceUpdates[' + j + '].result.') : update[key]);
            }
            update = copy;
          }
          updates[j] = update;
        }
        value = updates;
      }
      put(out, name, value);
    }
    return out;
  }

  var translateFn;

  return {
    // Resolves the global translate once, after the uploaded code ran. The
    // free name also finds a top-level const/let, which is not on globalThis.
    resolve: function () {
      translateFn = typeof translate === 'function' ? translate : undefined;
      takeLogs();
      return translateFn !== undefined;
    },
    call: function (argsJson) {
      var args = parse(argsJson), returned;
      if (logs.length > 0 || dropped > 0) takeLogs();
      try {
        returned = args.length === 1 ? translateFn(args[0]) : translateFn(args[0], args[1]);
      } catch (error) {
        return stringify({ threw: describe(error), logs: takeLogs() });
      }
      if (returned === null || typeof returned !== 'object' || isArray(returned) || returned instanceof PromiseCtor) {
        var type = returned === null ? 'null' : isArray(returned) ? 'an array'
          : returned instanceof PromiseCtor ? 'a Promise (translate must be synchronous)' : typeof returned;
        return stringify({ returnedType: type, logs: takeLogs() });
      }
      try {
        nonFinite = undefined;
        var ok = stringify(cleanReturn(returned));
        if (typeof ok !== 'string') throw new ErrorCtor('JSON.stringify produced nothing');
        // Concatenated rather than stringified as one object: this is the
        // per-call hot path, and both parts are already valid JSON.
        return '{"ok":' + ok
          + (nonFinite ? ',"nonFinite":' + stringify(nonFinite) : '')
          + (logs.length > 0 || dropped > 0 ? ',"logs":' + stringify(takeLogs()) : '')
          + '}';
      } catch (error) {
        return stringify({ unserializable: describe(error), logs: takeLogs() });
      }
    },
    logs: function () { return stringify(takeLogs()); },
  };
})()`;
