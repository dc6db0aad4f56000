/**
 * The script every context evaluates after the prelude and before the
 * uploaded code. It installs a capturing `console`, freezes the realm, and
 * returns the functions the host calls. It is plain JavaScript inside the
 * sandbox: the host lends the context no function of its own, so there is
 * nothing host-side for translator code to reach.
 *
 * Isolation per call. The uploaded code is compiled once as the body of a
 * factory (see `wrapCode`; the code is whole on its own, checked before), and
 * every call runs a fresh instance of it, so
 * its top-level variables start over on each call. Everything the code could
 * write to that outlives a call is frozen here, once per context: the global
 * object and every built-in reachable from it (prototypes, constructors,
 * lodash, Buffer, console, and the iterator and generator intrinsics only
 * reachable through instances). A write to them fails: silently in sloppy
 * code, with a TypeError in strict code. What is left per call is per call:
 * `_.uniqueId` counts from 1 in each call, and the log buffer is emptied.
 *
 * Frozen prototypes would turn `error.name = 'X'` or `obj.toString = f` on
 * one's own objects into failures (assignment looks up the inherited,
 * now read-only, property). For the few properties real code does assign
 * that way, the inherited property becomes an accessor whose setter defines
 * the property on the object written to, as SES does.
 *
 * Calls cross as one JSON string each way. The envelope coming back is
 *   {ok, nonFinite?, logs?} | {threw, logs} | {unserializable, logs} | {returnedType, logs} | {missing, logs}
 * and is validated by the host as untrusted data.
 *
 * Work done here runs in an interpreter compiled to WebAssembly, where even
 * JSON.stringify of six numbers costs microseconds: the per-call path keeps
 * it to one parse of a list in and one stringify of the result out.
 */

export const MAX_LOG_LINES = 100;
export const MAX_LOG_LINE_LENGTH = 1000;
export const MAX_LOG_CHARS = 16 * 1024;

export interface ThrownError {
  name: string;
  message: string;
  stack: string;
  /** The engine raised it for one of its limits (heap, stack), as far as the harness can tell; never set for what the code made. */
  engine?: boolean;
}

/** The entry points a translator's code may define, in the order the factory returns them. */
export const ENTRY_POINTS = ['translate', 'decodeUplink', 'encodeDownlink'] as const;
export type EntryPoint = (typeof ENTRY_POINTS)[number];

/**
 * Words that can never be a `var` name, so never an implicit global to catch.
 * `arguments` and `eval` are left out too: declaring them changes meaning.
 */
const NOT_DECLARABLE = new Set(
  ('break case catch class const continue debugger default delete do else enum export extends false finally for function if ' +
    'import in instanceof new null return super switch this throw true try typeof var void while with yield let static ' +
    'implements interface package private protected public await arguments eval undefined NaN Infinity').split(' '),
);

const IDENTIFIER = '[A-Za-z_$][\\w$]*';
/** `x = …`, `x += …`, `x ??= …`; not `x == …`, `x => …`, `a.x = …`. */
const ASSIGNED = new RegExp(`(?<![.\\w$])(${IDENTIFIER})\\s*(?:\\*\\*|<<|>>>|>>|&&|\\|\\||\\?\\?|[-+*/%&|^])?=(?![=>])`, 'g');
const UPDATED = new RegExp(`(?:\\+\\+|--)\\s*(${IDENTIFIER})|(?<![.\\w$])(${IDENTIFIER})\\s*(?:\\+\\+|--)`, 'g');
const LOOP_TARGET = new RegExp(`\\bfor\\s*\\(\\s*(${IDENTIFIER})\\s+(?:in|of)\\b`, 'g');

/**
 * Names the code may assign without declaring them: in sloppy code such an
 * assignment creates a global, which the frozen global object refuses. The
 * factory declares each of them in a scope of its own around the code, so
 * they work as before within a call and start over on the next.
 *
 * A textual scan over-approximates (a name in a string or a declared local
 * is caught too); an extra catcher is harmless, since it only shadows a
 * global of that name, which cannot exist. Names of real globals are left
 * out, since a catcher would shadow them.
 */
export function implicitGlobals(code: string, globals: ReadonlySet<string>): string[] {
  const names = new Set<string>();
  for (const pattern of [ASSIGNED, UPDATED, LOOP_TARGET]) {
    for (const match of code.matchAll(pattern)) {
      const name = match[1] ?? match[2];
      if (name && !NOT_DECLARABLE.has(name) && !globals.has(name)) names.add(name);
    }
  }
  return [...names].sort();
}

/** Lines the factory puts before the uploaded code; reported lines are shifted back by it. */
export const CODE_LINE_OFFSET = 1;

/**
 * The uploaded code as the body of a factory: evaluating this source gives a
 * function that runs the code's top level afresh and returns its entry points.
 * Only for code that compiles on its own as a script (context.ts checks it
 * first): pasted as text, code that does not could close the factory early.
 */
export function wrapCode(code: string, catchers: string[]): string {
  const declared = catchers.length > 0 ? `var ${catchers.join(', ')}; ` : '';
  const entries = ENTRY_POINTS.map((name) => `typeof ${name} === 'function' ? ${name} : undefined`).join(', ');
  return `(function () { ${declared}return (function () {\n${code}\n;return [${entries}];\n})(); })`;
}

export const HARNESS_SOURCE = String.raw`(function () {
  'use strict';
  var global = globalThis;
  var stringify = JSON.stringify, parse = JSON.parse;
  var isArray = Array.isArray, keys = Object.keys, defineProperty = Object.defineProperty;
  var getPrototypeOf = Object.getPrototypeOf, freeze = Object.freeze, ownKeys = Reflect.ownKeys;
  var describeProperty = Object.getOwnPropertyDescriptor, isView = ArrayBuffer.isView, arrayFrom = Array.from;
  var isFinite = Number.isFinite, toString = String, ErrorCtor = Error, PromiseCtor = Promise, DateCtor = Date;
  var MAX_LINES = ${MAX_LOG_LINES}, MAX_LINE = ${MAX_LOG_LINE_LENGTH}, MAX_CHARS = ${MAX_LOG_CHARS};
  var MAX_SCRUB_DEPTH = 64;

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

  // lodash keeps this counter in a closure; per call it starts over.
  var ids = 0;
  _.uniqueId = function uniqueId(prefix) { ids++; return (prefix == null ? '' : toString(prefix)) + ids; };

  // ---- freezing the realm ----

  // Inherited properties that code assigns on its own objects (see the header).
  function overridable(object, name) {
    var found = describeProperty(object, name);
    if (!found || !('value' in found)) return;
    var value = found.value;
    defineProperty(object, name, {
      get: function () { return value; },
      set: function (next) {
        if (this === object) throw new TypeError('Cannot assign to read only property \'' + toString(name) + '\' of a built-in');
        defineProperty(this, name, { value: next, writable: true, enumerable: true, configurable: true });
      },
      enumerable: found.enumerable, configurable: false,
    });
  }
  // ---- errors the engine raises for its limits, told apart from look-alikes ----

  // The engine raises an InternalError when the heap or the stack runs out.
  // Translator code can make one too (new InternalError('out of memory')),
  // which must not pass for the engine's: the constructor, and Reflect.construct
  // (which can give any error InternalError's prototype), mark what they make.
  var isError = typeof ErrorCtor.isError === 'function' ? ErrorCtor.isError : function (value) { return value instanceof ErrorCtor; };
  var madeByCode = new WeakSet(), internalProto;
  if (typeof InternalError === 'function') {
    var NativeInternalError = InternalError, nativeConstruct = Reflect.construct, applyFn = Reflect.apply;
    internalProto = NativeInternalError.prototype;
    var MadeInternalError = function InternalError(message) {
      var error = new.target === undefined ? applyFn(NativeInternalError, undefined, arguments) : nativeConstruct(NativeInternalError, arguments, new.target);
      madeByCode.add(error);
      return error;
    };
    defineProperty(MadeInternalError, 'prototype', { value: internalProto, writable: false });
    Object.setPrototypeOf(MadeInternalError, getPrototypeOf(NativeInternalError));
    defineProperty(internalProto, 'constructor', { value: MadeInternalError });
    defineProperty(global, 'InternalError', { value: MadeInternalError });
    defineProperty(Reflect, 'construct', {
      value: function construct(target, args) {
        var made = applyFn(nativeConstruct, undefined, arguments);
        if (isError(made)) madeByCode.add(made);
        return made;
      },
    });
  }
  // Whether a thrown value is an error the engine raised for one of its limits.
  function engineLimit(error) {
    return internalProto !== undefined && isError(error) && getPrototypeOf(error) === internalProto && !madeByCode.has(error);
  }

  ['constructor', 'toString', 'toLocaleString', 'valueOf'].forEach(function (name) { overridable(Object.prototype, name); });
  overridable(Function.prototype, 'toString');
  [Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError, AggregateError,
    typeof InternalError === 'function' ? InternalError : Error].forEach(function (ctor) {
    ['constructor', 'name', 'message', 'toString'].forEach(function (name) { overridable(ctor.prototype, name); });
  });

  // Intrinsics that no global names, reachable only through instances.
  function* generator() {}
  async function asyncFunction() {}
  async function* asyncGenerator() {}
  var hidden = [
    generator, generator(), asyncFunction, asyncGenerator, asyncGenerator(),
    [][Symbol.iterator](), new Map()[Symbol.iterator](), new Set()[Symbol.iterator](), ''[Symbol.iterator](),
    /./[Symbol.matchAll](''), (function () { return arguments; })(),
  ];
  if (typeof Iterator === 'function') {
    if (typeof Iterator.prototype.map === 'function') hidden.push([].values().map(function (x) { return x; }));
    if (typeof Iterator.from === 'function') hidden.push(Iterator.from({ next: function () { return { done: true }; } }));
  }

  var seen = new WeakSet(), pending = [global].concat(hidden);
  while (pending.length > 0) {
    var object = pending.pop();
    if ((typeof object !== 'object' && typeof object !== 'function') || object === null || seen.has(object)) continue;
    seen.add(object);
    // Typed arrays with elements cannot be frozen; none is shared, and each call makes its own.
    if (!isView(object)) freeze(object);
    pending.push(getPrototypeOf(object));
    var names = ownKeys(object);
    for (var n = 0; n < names.length; n++) {
      var property = describeProperty(object, names[n]);
      if (!property) continue;
      if ('value' in property) pending.push(property.value);
      else { pending.push(property.get); pending.push(property.set); }
    }
  }
  hidden = pending = seen = undefined;

  // ---- calls ----

  function describe(error) {
    try {
      if (error instanceof ErrorCtor) {
        var described = {
          name: toString(error.name),
          message: toString(error.message),
          stack: typeof error.stack === 'string' ? error.stack : '',
        };
        if (engineLimit(error)) described.engine = true;
        return described;
      }
      return { name: 'Thrown value', message: show(error), stack: '' };
    } catch (e) {
      return { name: 'Error', message: 'an error that could not be described', stack: '' };
    }
  }

  // NaN and undefined cannot cross as JSON, and the contract removes them from
  // results; infinities are reported back so the host can name the key. A
  // field's value that is an object or a list is scrubbed as a codec's data is
  // (JSON would write what it cannot hold in it as null).
  var nonFinite;
  function report(path, value) {
    if (!nonFinite) nonFinite = [];
    nonFinite[nonFinite.length] = { path: path, value: value !== value ? 'NaN' : value > 0 ? 'Infinity' : '-Infinity' };
  }
  function clean(fields, prefix) {
    if (fields === null || typeof fields !== 'object' || isArray(fields)) return fields;
    var names = keys(fields), out, i, name, value, next;
    for (i = 0; i < names.length; i++) {
      name = names[i];
      value = fields[name];
      next = value;
      if (typeof value === 'number') {
        if (value - value !== 0) {
          if (value === value) report(prefix + name, value);
          next = undefined;
        }
      } else if (value !== null && typeof value === 'object') {
        next = scrub(value, prefix + name, 1);
      }
      // The common case: nothing to drop, so no copy (JSON leaves undefined out by itself).
      if (next !== value && !out) {
        out = {};
        for (var j = 0; j < i; j++) put(out, names[j], fields[names[j]]);
      }
      if (out && next !== undefined) put(out, name, next);
    }
    return out || fields;
  }

  // A codec's data is nested: NaN in it is dropped as from a result where a
  // key can be left out, and reported where it cannot (a list keeps its
  // places); an infinity is reported by its path anywhere. Copies only what
  // it changes; paths are only built for what is reported or descended into.
  function at(path, array, name) {
    return array ? path + '[' + name + ']' : (path ? path + '.' : '') + name;
  }
  function scrub(value, path, depth) {
    if (value === null || typeof value !== 'object' || depth > MAX_SCRUB_DEPTH) return value;
    var array = isArray(value), names = array ? null : keys(value), count = array ? value.length : names.length;
    var out;
    for (var i = 0; i < count; i++) {
      var name = array ? i : names[i], item = value[name], next = item;
      if (typeof item === 'number') {
        if (item - item !== 0) {
          if (item === item || array) report(at(path, array, name), item);
          next = undefined;
        }
      } else if (item !== null && typeof item === 'object') {
        next = scrub(item, at(path, array, name), depth + 1);
      }
      if (next !== item && !out) {
        out = array ? [] : {};
        for (var j = 0; j < i; j++) put(out, array ? j : names[j], value[array ? j : names[j]]);
      }
      if (out) {
        if (array) out[i] = next === undefined ? null : next;
        else if (next !== undefined) put(out, name, next);
      }
    }
    return out || value;
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

  // {data?, warnings?, errors?} of decodeUplink, {bytes?, fPort?, warnings?, errors?} of encodeDownlink.
  function cleanCodec(returned) {
    var out = {}, names = keys(returned);
    for (var i = 0; i < names.length; i++) {
      var name = names[i], value = returned[name];
      if (name === 'data') value = scrub(value, '', 0);
      else if (name === 'bytes' && value !== null && typeof value === 'object' && isView(value)) value = arrayFrom(value);
      put(out, name, value);
    }
    return out;
  }

  var factory;

  function instantiate() {
    var entries = factory();
    if (!isArray(entries) || entries.length !== 3) throw new TypeError('the code returned from its top level; it must define its functions and not return');
    return entries;
  }

  // decodeUplink's return as the host reads it: {data?, warnings?, errors?},
  // each read once; other keys are not sent (the host reads no others).
  // JSON.stringify writes NaN and the infinities as null, so data whose text
  // has no "null" in it needed no scrub; with one, the text stands only when
  // scrub finds nothing to change (the null was a real null), otherwise the
  // data takes the general way. Stringifying is the dearest step of a call in
  // this engine: this does it once, on the data alone, without a copy.
  function finishDecoded(returned) {
    if (returned === null || typeof returned !== 'object' || isArray(returned) || returned instanceof PromiseCtor) return finish(returned, true);
    var text = '', data, warnings, errors, json;
    try {
      nonFinite = undefined;
      data = returned.data; warnings = returned.warnings; errors = returned.errors;
      if (data !== undefined) {
        json = stringify(data);
        if (json !== undefined && json.indexOf('null') >= 0) {
          var scrubbed = scrub(data, '', 0);
          if (scrubbed !== data) json = stringify(scrubbed);
        }
        if (json !== undefined) text = '"data":' + json;
      }
      // A function or symbol is left out, as JSON.stringify leaves it out of an object.
      json = warnings === undefined ? undefined : isArray(warnings) && warnings.length === 0 ? '[]' : stringify(warnings);
      if (json !== undefined) text += (text ? ',' : '') + '"warnings":' + json;
      json = errors === undefined ? undefined : isArray(errors) && errors.length === 0 ? '[]' : stringify(errors);
      if (json !== undefined) text += (text ? ',' : '') + '"errors":' + json;
    } catch (error) {
      return unserializable(error);
    }
    return ok('{' + text + '}');
  }

  // translate's return as the host reads it. Stringified whole when nothing
  // in it needs cleaning: JSON.stringify drops undefined properties as the
  // cleaning does, and writes NaN and the infinities as null, so a text
  // without "null" in it is what the cleaned copy would give. Anything else
  // (a null, a toJSON of its own) takes the general way. A throw while
  // stringifying is what the general way would meet reading the same value.
  function finishTranslated(returned) {
    if (returned === null || typeof returned !== 'object' || isArray(returned) || returned instanceof PromiseCtor || typeof returned.toJSON === 'function') return finish(returned, false);
    var json;
    try {
      json = stringify(returned);
    } catch (error) {
      return unserializable(error);
    }
    if (json.indexOf('null') >= 0) return finish(returned, false);
    nonFinite = undefined;
    return ok(json);
  }

  function finish(returned, codec) {
    if (returned === null || typeof returned !== 'object' || isArray(returned) || returned instanceof PromiseCtor) {
      var type = returned === null ? 'null' : isArray(returned) ? 'an array'
        : returned instanceof PromiseCtor ? 'a Promise (it must be synchronous)' : typeof returned;
      return stringify({ returnedType: type, logs: takeLogs() });
    }
    try {
      nonFinite = undefined;
      var json = stringify(codec ? cleanCodec(returned) : cleanReturn(returned));
      if (typeof json !== 'string') throw new ErrorCtor('JSON.stringify produced nothing');
      return ok(json);
    } catch (error) {
      return unserializable(error);
    }
  }

  // A result's envelope, with what this call's cleaning reported and its logs.
  // Concatenated rather than stringified as one object: this is the per-call
  // hot path, and the result is already valid JSON.
  function ok(json) {
    return '{"ok":' + json
      + (nonFinite ? ',"nonFinite":' + stringify(nonFinite) : '')
      + (logs.length > 0 || dropped > 0 ? ',"logs":' + stringify(takeLogs()) : '')
      + '}';
  }

  function unserializable(error) {
    return stringify({ unserializable: describe(error), logs: takeLogs() });
  }

  // decodeUplink's input as the host writes it (uplinkInput in sandbox.ts):
  // [fPort, recvTime in ms, [bytes...], variables?]. A list parses faster
  // than an object here, and a Date is made from a number faster than from text.
  function uplink(text) {
    var a = parse(text);
    return { bytes: a[2], fPort: a[0], recvTime: new DateCtor(a[1]), variables: a.length > 3 ? a[3] : {} };
  }

  // entry: 0 translate(args...), 1 decodeUplink(input), 2 encodeDownlink(input).
  function run(entry, argsText) {
    var args = entry === 1 ? uplink(argsText) : parse(argsText), returned;
    if (logs.length > 0 || dropped > 0) takeLogs();
    ids = 0;
    try {
      var fn = instantiate()[entry];
      if (typeof fn !== 'function') return stringify({ missing: entry, logs: takeLogs() });
      if (entry === 1) returned = fn(args);
      else returned = args.length === 1 ? fn(args[0]) : fn(args[0], args[1]);
    } catch (error) {
      return stringify({ threw: describe(error), logs: takeLogs() });
    }
    // Reading the returned value runs the translator's code too (getters,
    // toJSON, a Proxy's traps): what it throws is told apart here, like any
    // throw, and never leaves the harness.
    try {
      return entry === 1 ? finishDecoded(returned) : entry === 0 ? finishTranslated(returned) : finish(returned, true);
    } catch (error) {
      return unserializable(error);
    }
  }

  return {
    // Takes the compiled factory, runs the code's top level once, and says
    // which entry points it defines.
    install: function (compiled) {
      factory = compiled;
      var entries;
      try {
        entries = instantiate();
      } catch (error) {
        return stringify({ threw: describe(error), logs: takeLogs() });
      }
      takeLogs();
      return stringify({ entries: [typeof entries[0] === 'function', typeof entries[1] === 'function', typeof entries[2] === 'function'] });
    },
    globals: function () { return stringify(ownKeys(global).filter(function (k) { return typeof k === 'string'; })); },
    call: function (argsJson) { return run(0, argsJson); },
    decodeUplink: function (inputText) { return run(1, inputText); },
    encodeDownlink: function (inputJson) { return run(2, inputJson); },
    logs: function () { return stringify(takeLogs()); },
  };
})()`;
