/**
 * The deadline of a call interrupts the engine only while it runs the
 * translator's JavaScript (or calls a function from a native method). A
 * native method that loops without calling anything never sees it:
 * `Array.prototype.indexOf.call({length: 2 ** 40}, 1)`, or `sort()` of a
 * sparse `new Array(2 ** 32 - 1)`, runs for hours in one call and blocks the
 * whole process. Their loops are bounded by a `length` the translator
 * chooses, which costs it no memory.
 *
 * This script runs first in every context, before lodash and Buffer take
 * their references to the built-ins and before the realm is frozen. It wraps
 * each generic array method that loops natively over its receiver's length,
 * so that a receiver longer than MAX_ARRAY_LENGTH (more elements than the
 * sandbox's memory can hold, limits.ts) gets a RangeError before the loop
 * starts. The length is read from its data property without running any code
 * of the translator, so the native method reads the same one after: a length
 * given by a getter, by an object's valueOf or by a Proxy could differ on the
 * second read, so array methods refuse such receivers (TypeError). Proxies
 * are known by the `Proxy` constructor, which keeps a weak set of those it
 * makes.
 *
 * Beyond the receiver's own length:
 * - `concat` reads every item's length after running code of the
 *   translator's (an element's getter, a species constructor): it copies one
 *   item per native call, each checked just before, and runs on arrays made
 *   by `Array` only.
 * - `flat` reads the length of each nested array in its loop: it runs as
 *   `flatMap` whose callback checks each nested array (and flattens deeper
 *   levels in JavaScript); `flatMap` checks what its callback returns.
 * - `sort` and `toSorted` without a comparator compare in native code; they
 *   get the default comparison as a function, which the deadline interrupts.
 * - `Iterator.prototype.drop` skips natively; it becomes a `filter` whose
 *   predicate counts.
 *
 * Native loops that call a function on every step (a callback, a Set's
 * `add`), and loops bounded by memory (`Array.from`, spreading, typed arrays,
 * strings), are interrupted or stopped by the memory limit, and are left as
 * they are.
 */
import { MAX_ARRAY_LENGTH } from './limits.js';

/**
 * Methods whose native loop runs up to the receiver's length, guarded by that
 * length alone. These take at most two arguments, and an argument given as
 * undefined means what a missing one means, so the wrapper passes two.
 */
const CHECKED = [
  'indexOf', 'includes', 'join', 'toString',
  'forEach', 'every', 'some', 'map', 'filter',
  'find', 'findIndex', 'findLast', 'findLastIndex',
  'reverse', 'slice', 'shift', 'with', 'toReversed',
];

/** The same, for methods that take more arguments or tell a missing one from undefined (`reduce(f)`, `splice(1)`): passed as given. */
const CHECKED_AS_GIVEN = ['lastIndexOf', 'toLocaleString', 'reduce', 'reduceRight', 'fill', 'copyWithin', 'splice', 'unshift', 'toSpliced'];

/** Typed-array methods that loop over the array: paced (below), not capped, since a typed array's elements are in memory. */
const TYPED_PACED = [
  'indexOf', 'lastIndexOf', 'includes', 'join', 'toLocaleString',
  'forEach', 'every', 'some', 'map', 'filter', 'reduce', 'reduceRight',
  'find', 'findIndex', 'findLast', 'findLastIndex',
  'reverse', 'fill', 'copyWithin', 'slice', 'set', 'sort', 'toSorted', 'toReversed', 'with',
];

/**
 * Elements of a guarded call's loop per step of JavaScript it takes first
 * (see `check` below). The engine checks the deadline about every 10,000
 * steps; at up to 300 ns an element (a sparse sort, measured here) that is
 * every 100 ms at most.
 */
const STRIDE = 32;

export const GUARDS_SOURCE = String.raw`(function () {
  'use strict';
  var MAX = ${MAX_ARRAY_LENGTH}, STRIDE = ${STRIDE};
  var apply = Reflect.apply, isArray = Array.isArray, getPrototypeOf = Object.getPrototypeOf, trunc = Math.trunc;
  var describe = Object.getOwnPropertyDescriptor, defineProperty = Object.defineProperty, toText = String;
  var ArrayProto = Array.prototype, ArrayCtor = Array, toObject = Object, TypeErrorCtor = TypeError, RangeErrorCtor = RangeError;
  var typedLength = describe(getPrototypeOf(Uint8Array.prototype), 'length').get;
  var spreadable = Symbol.isConcatSpreadable;
  var proxies = new WeakSet();

  // ---- Proxy: the constructor remembers what it makes ----

  var NativeProxy = Proxy, nativeRevocable = Proxy.revocable;
  var GuardedProxy = function Proxy(target, handler) {
    if (new.target === undefined) throw new TypeErrorCtor("Constructor Proxy requires 'new'");
    var proxy = new NativeProxy(target, handler);
    proxies.add(proxy);
    return proxy;
  }.bind();
  defineProperty(GuardedProxy, 'name', { value: 'Proxy' });
  defineProperty(GuardedProxy, 'revocable', {
    value: function revocable(target, handler) {
      var made = apply(nativeRevocable, NativeProxy, [target, handler]);
      proxies.add(made.proxy);
      return made;
    },
    writable: true, configurable: true, enumerable: false,
  });
  defineProperty(globalThis, 'Proxy', { value: GuardedProxy });

  // ---- lengths, read as the native methods will read them ----

  function refuse(name) {
    return new TypeErrorCtor('Array.prototype.' + name + ' does not run in the sandbox on a Proxy, nor on an object whose length (or Symbol.isConcatSpreadable) is a getter or an object');
  }
  function tooLong(name, length) {
    return new RangeErrorCtor('Array.prototype.' + name + ': length ' + length + ' is more than the ' + MAX + ' elements a translator\'s memory can hold');
  }
  // The property a native method will find, found without running the translator's code.
  function lookUp(object, key, name) {
    for (var p = object; p !== null; p = getPrototypeOf(p)) {
      if (proxies.has(p)) throw refuse(name);
      var found = describe(p, key);
      if (found !== undefined) return found;
    }
    return undefined;
  }
  function lengthOf(object, name) {
    // A primitive's length is a string's, held in memory; null and undefined make the method throw.
    if (object === null || (typeof object !== 'object' && typeof object !== 'function')) return 0;
    if (isArray(object) && !proxies.has(object)) return object.length;
    var found = lookUp(object, 'length', name);
    if (found === undefined) return 0;
    if ('value' in found) {
      var value = found.value;
      if (value !== null && (typeof value === 'object' || typeof value === 'function')) throw refuse(name);
      return +value;
    }
    if (found.get === typedLength && typedLength !== undefined) return apply(typedLength, object, []);
    throw refuse(name);
  }
  // The deadline is checked every few thousand steps of JavaScript (turns of
  // a loop, calls), not by time, and a native loop takes no steps: many calls
  // of a long one in a loop of the translator's would run for minutes before
  // the check comes. A guarded call takes one step per STRIDE elements first.
  function check(object, name) {
    var length = lengthOf(object, name);
    if (length > MAX) throw tooLong(name, length);
    for (var steps = length / STRIDE; steps > 1; steps--);
    return length;
  }

  function install(name, wrapped) {
    var original = ArrayProto[name];
    defineProperty(wrapped, 'name', { value: name });
    defineProperty(wrapped, 'length', { value: original.length });
    defineProperty(ArrayProto, name, { value: wrapped });
  }
  // A plain array of up to STRIDE elements, the common case, is told apart inline.
  ${JSON.stringify(CHECKED)}.forEach(function (name) {
    var original = ArrayProto[name];
    if (typeof original !== 'function') return;
    install(name, function (a, b) {
      var o = this;
      if (!isArray(o) || proxies.has(o) || o.length > STRIDE) check(o, name);
      return original.call(o, a, b);
    });
  });
  ${JSON.stringify(CHECKED_AS_GIVEN)}.forEach(function (name) {
    var original = ArrayProto[name];
    if (typeof original !== 'function') return;
    install(name, function () {
      var o = this;
      if (!isArray(o) || proxies.has(o) || o.length > STRIDE) check(o, name);
      return apply(original, o, arguments);
    });
  });

  // ---- sort, toSorted: the default order as a function the deadline interrupts ----

  function text(value) {
    if (typeof value === 'symbol') throw new TypeErrorCtor('Cannot convert a Symbol value to a string');
    return toText(value);
  }
  // SortCompare without a comparator; undefined and holes never reach it.
  function compareAsText(x, y) {
    var a = text(x), b = text(y);
    return a < b ? -1 : b < a ? 1 : 0;
  }
  ['sort', 'toSorted'].forEach(function (name) {
    var original = ArrayProto[name];
    if (typeof original !== 'function') return;
    install(name, function (comparefn) {
      check(this, name);
      return apply(original, this, [comparefn === undefined ? compareAsText : comparefn]);
    });
  });

  // ---- concat: one item per native call, each checked just before ----

  var nativeConcat = ArrayProto.concat;
  function spreadLength(item) {
    if (item === null || (typeof item !== 'object' && typeof item !== 'function')) return 0;
    var found = lookUp(item, spreadable, 'concat');
    if (found !== undefined && !('value' in found)) throw refuse('concat');
    var spreads = found === undefined || found.value === undefined ? isArray(item) : !!found.value;
    return spreads ? lengthOf(item, 'concat') : 0;
  }
  install('concat', function (item) {
    var receiver = this;
    // The result is made by the receiver's constructor, which may run code of the translator's; only Array's is run here.
    if (isArray(receiver) && !proxies.has(receiver)) {
      var made = lookUp(receiver, 'constructor', 'concat');
      if (made !== undefined && (!('value' in made) || (made.value !== ArrayCtor && made.value !== undefined))) {
        throw new TypeErrorCtor('Array.prototype.concat runs in the sandbox only on arrays made by Array (not by a subclass or another constructor)');
      }
    } else if (receiver === null || receiver === undefined) {
      return apply(nativeConcat, receiver, arguments);
    }
    var result = [];
    for (var i = -1; i < arguments.length; i++) {
      var next = i < 0 ? toObject(receiver) : arguments[i];
      var length = result.length + spreadLength(next);
      if (length > MAX) throw tooLong('concat', length);
      result = apply(nativeConcat, result, [next]);
    }
    return result;
  });

  // ---- flat, flatMap: every nested array checked before the native loop reads it ----

  var nativeFlatMap = ArrayProto.flatMap;
  // flat below its first level, into a fresh array, in JavaScript.
  function flatInto(out, source, depth) {
    var length = check(source, 'flat');
    for (var i = 0; i < length; i++) {
      if (!(i in source)) continue;
      var element = source[i];
      if (depth > 0 && isArray(element)) flatInto(out, element, depth - 1);
      else out[out.length] = element;
    }
    return out;
  }
  install('flat', function () {
    var depth = arguments.length === 0 || arguments[0] === undefined ? 1 : +arguments[0];
    depth = depth !== depth ? 0 : trunc(depth);
    check(this, 'flat');
    return apply(nativeFlatMap, this, [function (element) {
      if (!isArray(element)) return element;
      if (depth < 1) return [element];
      if (depth < 2) {
        check(element, 'flat');
        return element;
      }
      return flatInto([], element, depth - 1);
    }]);
  });
  install('flatMap', function (callback) {
    check(this, 'flatMap');
    if (typeof callback !== 'function') return apply(nativeFlatMap, this, arguments);
    var thisArg = arguments[1];
    return apply(nativeFlatMap, this, [function (element, index, array) {
      var mapped = apply(callback, thisArg, [element, index, array]);
      if (isArray(mapped)) check(mapped, 'flatMap');
      return mapped;
    }]);
  });

  // ---- typed arrays: their length is memory, but a loop of long calls still needs its steps ----

  var TypedProto = getPrototypeOf(Uint8Array.prototype);
  ${JSON.stringify(TYPED_PACED)}.forEach(function (name) {
    var original = TypedProto[name];
    if (typeof original !== 'function') return;
    var paced = function () {
      // The getter throws for what is not a typed array, as the method itself would.
      for (var steps = apply(typedLength, this, []) / STRIDE; steps > 1; steps--);
      return apply(original, this, arguments);
    };
    defineProperty(paced, 'name', { value: name });
    defineProperty(paced, 'length', { value: original.length });
    defineProperty(TypedProto, name, { value: paced });
  });

  // ---- Iterator.prototype.drop: skipping as a filter, one call per step ----

  if (typeof Iterator === 'function' && typeof Iterator.prototype.drop === 'function' && typeof Iterator.prototype.filter === 'function') {
    var IteratorProto = Iterator.prototype, nativeDrop = IteratorProto.drop, nativeFilter = IteratorProto.filter;
    var drop = function (limit) {
      var iterator = this;
      if (iterator === null || (typeof iterator !== 'object' && typeof iterator !== 'function')) return apply(nativeDrop, iterator, [limit]);
      var count;
      try {
        count = +limit;
      } catch (error) {
        try {
          var close = iterator['return'];
          if (close !== undefined && close !== null) apply(close, iterator, []);
        } catch (ignored) {}
        throw error;
      }
      // NaN and negative limits: the native method throws its RangeError, and closes the iterator.
      if (count !== count || count < 0) return apply(nativeDrop, iterator, [count]);
      var left = trunc(count);
      return apply(nativeFilter, iterator, [function () {
        if (left > 0) {
          left--;
          return false;
        }
        return true;
      }]);
    };
    defineProperty(drop, 'name', { value: 'drop' });
    defineProperty(drop, 'length', { value: 1 });
    defineProperty(IteratorProto, 'drop', { value: drop });
  }
})();`;
