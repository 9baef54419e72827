package botrunner

import "github.com/dop251/goja"

// structuredClone as the HTML standard's structured clone (and Node's): primitives, plain objects
// (own enumerable properties; a class instance comes back as a plain object), arrays, Date,
// RegExp, Map, Set, ArrayBuffer, typed arrays and DataView (a Buffer comes back as a Uint8Array,
// as in Node), boxed primitives and errors, with shared and cyclic references kept. Functions,
// symbols and other objects (promises, weak collections) throw a DataCloneError.
const structuredCloneSource = `(function () {
  const errors = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const views = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array,
    Uint32Array, Float32Array, Float64Array };
  const toString = Object.prototype.toString;
  return function structuredClone(value) {
    if (arguments.length === 0) {
      const e = new TypeError('The "value" argument must be specified');
      e.code = 'ERR_MISSING_ARGS';
      throw e;
    }
    const seen = new Map();
    const fail = (v) => {
      const e = new Error((typeof v === 'symbol' ? v.toString() : String(v)) + ' could not be cloned.');
      e.name = 'DataCloneError';
      e.code = 25;
      throw e;
    };
    const props = (v, out) => {
      seen.set(v, out);
      for (const k of Object.keys(v)) out[k] = clone(v[k]);
      return out;
    };
    function clone(v) {
      if (typeof v === 'function' || typeof v === 'symbol') fail(v);
      if (v === null || typeof v !== 'object') return v;
      if (seen.has(v)) return seen.get(v);
      let out;
      const tag = toString.call(v).slice(8, -1);
      switch (tag) {
        case 'Array': return props(v, new Array(v.length));
        case 'Object': return props(v, {});
        case 'Date': out = new Date(v.getTime()); break;
        case 'RegExp': out = new RegExp(v.source, v.flags); break;
        case 'Boolean': case 'Number': case 'String': out = Object(v.valueOf()); break;
        case 'ArrayBuffer': out = v.slice(0); break;
        case 'DataView': out = new DataView(clone(v.buffer), v.byteOffset, v.byteLength); break;
        case 'Map':
          out = new Map();
          seen.set(v, out);
          for (const [k, val] of v) out.set(clone(k), clone(val));
          return out;
        case 'Set':
          out = new Set();
          seen.set(v, out);
          for (const k of v) out.add(clone(k));
          return out;
        case 'Error': {
          const C = Object.prototype.hasOwnProperty.call(errors, v.name) ? errors[v.name] : Error;
          out = new C(v.message);
          seen.set(v, out);
          if ('stack' in v) out.stack = String(v.stack);
          if ('cause' in v) out.cause = clone(v.cause);
          return out;
        }
        default:
          if (Object.prototype.hasOwnProperty.call(views, tag) && ArrayBuffer.isView(v)) {
            out = new views[tag](clone(v.buffer), v.byteOffset, v.length);
            break;
          }
          fail(v);
      }
      seen.set(v, out);
      return out;
    }
    return clone(value);
  };
})`

var structuredCloneProgram = embeddedProgram("structuredClone", structuredCloneSource)

func (x *execution) newStructuredClone() goja.Value {
	return x.evalFactory(structuredCloneProgram())
}
