// fetch for bots: fetch, Request, Response, Headers and FormData as in Node (WHATWG fetch), and
// what require('node-fetch') and require('form-data') give. native.fetch sends the request
// through the gateway's egress (the project's allow-list) and returns a promise the run's
// event loop settles, so several fetches run at once. Bodies are bytes (Uint8Array); there are
// no streams: a body is read whole.
(function (native) {
  'use strict';

  const SearchParams = native.URLSearchParams;
  const encode = (s) => native.encode(String(s));
  const decode = (b) => native.decode(b);

  function checkName(name) {
    name = String(name);
    if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) {
      throw new TypeError(`Headers: '${name}' is not a valid header name`);
    }
    return name.toLowerCase();
  }

  function checkValue(value) {
    value = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, '');
    if (/[\0\r\n]/.test(value)) {
      throw new TypeError('Headers: a header value may not contain NUL, CR or LF');
    }
    return value;
  }

  class Headers {
    constructor(init) {
      this._list = []; // [lower-case name, value], in insertion order
      if (init === undefined || init === null) {
        return;
      }
      if (init instanceof Headers) {
        init.forEach((v, k) => this.append(k, v));
      } else if (typeof init[Symbol.iterator] === 'function') {
        for (const pair of init) {
          const p = Array.from(pair);
          if (p.length !== 2) {
            throw new TypeError('Headers: each header must be a [name, value] pair');
          }
          this.append(p[0], p[1]);
        }
      } else if (typeof init === 'object') {
        for (const k of Object.keys(init)) {
          const v = init[k];
          if (Array.isArray(v)) {
            v.forEach((e) => this.append(k, e));
          } else if (v !== undefined) {
            this.append(k, v);
          }
        }
      } else {
        throw new TypeError('Headers: the init must be an object, an iterable of pairs or Headers');
      }
    }
    append(name, value) {
      this._list.push([checkName(name), checkValue(value)]);
    }
    set(name, value) {
      const n = checkName(name);
      const v = checkValue(value);
      const i = this._list.findIndex((e) => e[0] === n);
      if (i < 0) {
        this._list.push([n, v]);
        return;
      }
      this._list[i][1] = v;
      this._list = this._list.filter((e, j) => e[0] !== n || j === i);
    }
    get(name) {
      const n = checkName(name);
      const vs = this._list.filter((e) => e[0] === n).map((e) => e[1]);
      return vs.length === 0 ? null : vs.join(', ');
    }
    getSetCookie() {
      return this._list.filter((e) => e[0] === 'set-cookie').map((e) => e[1]);
    }
    has(name) {
      const n = checkName(name);
      return this._list.some((e) => e[0] === n);
    }
    delete(name) {
      const n = checkName(name);
      this._list = this._list.filter((e) => e[0] !== n);
    }
    // The combined headers, sorted by name, as the standard iterates them.
    _sorted() {
      const names = [...new Set(this._list.map((e) => e[0]))].sort();
      const out = [];
      for (const n of names) {
        if (n === 'set-cookie') {
          this.getSetCookie().forEach((v) => out.push([n, v]));
        } else {
          out.push([n, this.get(n)]);
        }
      }
      return out;
    }
    forEach(cb, thisArg) {
      for (const [k, v] of this._sorted()) {
        cb.call(thisArg, v, k, this);
      }
    }
    entries() {
      return this._sorted()[Symbol.iterator]();
    }
    keys() {
      return this._sorted().map((e) => e[0])[Symbol.iterator]();
    }
    values() {
      return this._sorted().map((e) => e[1])[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    // node-fetch's raw(): name → array of values.
    raw() {
      const out = {};
      for (const [k, v] of this._list) {
        (out[k] = out[k] || []).push(v);
      }
      return out;
    }
    get [Symbol.toStringTag]() {
      return 'Headers';
    }
  }

  function concat(parts) {
    let n = 0;
    for (const p of parts) {
      n += p.byteLength;
    }
    const out = new Uint8Array(n);
    let off = 0;
    for (const p of parts) {
      out.set(p, off);
      off += p.byteLength;
    }
    return out;
  }

  function toBytes(v) {
    if (v instanceof Uint8Array) {
      return v;
    }
    if (v instanceof ArrayBuffer) {
      return new Uint8Array(v);
    }
    if (ArrayBuffer.isView(v)) {
      return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    }
    return encode(v);
  }

  const isBinary = (v) => v instanceof ArrayBuffer || ArrayBuffer.isView(v);

  let boundaries = 0;

  // FormData is the WHATWG class with form-data's (the npm package's) methods besides.
  class FormData {
    constructor() {
      this._entries = []; // [name, value, filename, contentType]
      boundaries += 1;
      this._boundary = '----fhirgateFormBoundary' + Date.now().toString(16) + boundaries.toString(16);
    }
    // append(name, value, filename) as WHATWG, or append(name, value, {filename, contentType})
    // as form-data.
    append(name, value, options) {
      let filename;
      let contentType;
      if (typeof options === 'string') {
        filename = options;
      } else if (options && typeof options === 'object') {
        filename = options.filename;
        contentType = options.contentType;
      }
      if (isBinary(value)) {
        value = toBytes(value);
        if (filename === undefined) {
          filename = 'blob';
        }
      } else {
        value = String(value);
      }
      this._entries.push([String(name), value, filename, contentType]);
    }
    set(name, value, options) {
      this.delete(name);
      this.append(name, value, options);
    }
    get(name) {
      const e = this._entries.find((e) => e[0] === String(name));
      return e ? e[1] : null;
    }
    getAll(name) {
      return this._entries.filter((e) => e[0] === String(name)).map((e) => e[1]);
    }
    has(name) {
      return this._entries.some((e) => e[0] === String(name));
    }
    delete(name) {
      this._entries = this._entries.filter((e) => e[0] !== String(name));
    }
    forEach(cb, thisArg) {
      for (const e of this._entries) {
        cb.call(thisArg, e[1], e[0], this);
      }
    }
    entries() {
      return this._entries.map((e) => [e[0], e[1]])[Symbol.iterator]();
    }
    keys() {
      return this._entries.map((e) => e[0])[Symbol.iterator]();
    }
    values() {
      return this._entries.map((e) => e[1])[Symbol.iterator]();
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    getBoundary() {
      return this._boundary;
    }
    setBoundary(b) {
      this._boundary = String(b);
    }
    getHeaders(extra) {
      return Object.assign({ 'content-type': 'multipart/form-data; boundary=' + this._boundary }, extra || {});
    }
    getBuffer() {
      const esc = (s) => String(s).replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
      const parts = [];
      for (const [name, value, filename, contentType] of this._entries) {
        let head = `--${this._boundary}\r\nContent-Disposition: form-data; name="${esc(name)}"`;
        if (filename !== undefined) {
          head += `; filename="${esc(filename)}"\r\nContent-Type: ${contentType || 'application/octet-stream'}`;
        } else if (contentType) {
          head += `\r\nContent-Type: ${contentType}`;
        }
        parts.push(encode(head + '\r\n\r\n'), toBytes(value), encode('\r\n'));
      }
      parts.push(encode(`--${this._boundary}--\r\n`));
      return concat(parts);
    }
    getLengthSync() {
      return this.getBuffer().byteLength;
    }
    get [Symbol.toStringTag]() {
      return 'FormData';
    }
  }

  // extractBody turns a body init into bytes and the content type it implies.
  function extractBody(body) {
    if (body === undefined || body === null) {
      return [null, null];
    }
    if (typeof body === 'string') {
      return [encode(body), 'text/plain;charset=UTF-8'];
    }
    if (body instanceof SearchParams) {
      return [encode(body.toString()), 'application/x-www-form-urlencoded;charset=UTF-8'];
    }
    if (body instanceof FormData) {
      return [body.getBuffer(), 'multipart/form-data; boundary=' + body.getBoundary()];
    }
    if (isBinary(body)) {
      return [toBytes(body).slice(), null];
    }
    if (body instanceof Body) {
      return [body._bytes, body.headers.get('content-type')];
    }
    if (typeof body === 'object' && typeof body.pipe === 'function') {
      throw new TypeError('fetch: stream bodies are not supported in the bot sandbox; pass a string or bytes');
    }
    return [encode(String(body)), 'text/plain;charset=UTF-8'];
  }

  class Body {
    _init(body, headers) {
      const [bytes, type] = extractBody(body);
      this._bytes = bytes;
      this._used = false;
      this.headers = new Headers(headers);
      if (type && !this.headers.has('content-type')) {
        this.headers.set('content-type', type);
      }
    }
    get bodyUsed() {
      return this._used;
    }
    get body() {
      return this._bytes === null ? null : this._bytes;
    }
    _consume() {
      if (this._used) {
        return Promise.reject(new TypeError('Body is unusable: Body has already been read'));
      }
      this._used = true;
      return Promise.resolve(this._bytes === null ? new Uint8Array(0) : this._bytes);
    }
    arrayBuffer() {
      return this._consume().then((b) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
    }
    bytes() {
      return this._consume().then((b) => b.slice());
    }
    text() {
      return this._consume().then(decode);
    }
    json() {
      return this.text().then((t) => JSON.parse(t));
    }
    formData() {
      return Promise.reject(new TypeError('formData() is not supported in the bot sandbox'));
    }
    blob() {
      return Promise.reject(new TypeError('blob() is not supported in the bot sandbox; use arrayBuffer()'));
    }
    // node-fetch v2's buffer(): a Buffer when the sandbox has one, else the bytes.
    buffer() {
      return this._consume().then((b) => (typeof Buffer === 'function' ? Buffer.from(b) : b.slice()));
    }
  }

  const METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'POST', 'PUT', 'PATCH'];

  class Request extends Body {
    constructor(input, init) {
      super();
      init = init || {};
      let from = null;
      if (input instanceof Request) {
        from = input;
      }
      const url = from ? from.url : String(input instanceof Object && input.href ? input.href : input);
      let parsed;
      try {
        parsed = new URL(url);
      } catch (e) {
        throw new TypeError(`Failed to parse URL from ${url}`);
      }
      if (parsed.username || parsed.password) {
        throw new TypeError(`Request cannot be constructed from a URL that includes credentials: ${url}`);
      }
      this.url = parsed.href;
      let method = init.method !== undefined ? String(init.method) : from ? from.method : 'GET';
      if (METHODS.includes(method.toUpperCase())) {
        method = method.toUpperCase();
      }
      if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(method) || ['CONNECT', 'TRACE', 'TRACK'].includes(method.toUpperCase())) {
        throw new TypeError(`'${method}' is not a valid HTTP method`);
      }
      this.method = method;
      this.redirect = init.redirect || (from ? from.redirect : 'follow');
      if (!['follow', 'manual', 'error'].includes(this.redirect)) {
        throw new TypeError(`'${this.redirect}' is not a valid redirect mode`);
      }
      this.signal = init.signal || (from ? from.signal : undefined);
      let body = init.body !== undefined ? init.body : from ? from._bytes : null;
      if (body !== null && body !== undefined && (method === 'GET' || method === 'HEAD')) {
        throw new TypeError('Request with GET/HEAD method cannot have body.');
      }
      this._init(body, init.headers !== undefined ? init.headers : from ? from.headers : undefined);
    }
    clone() {
      if (this._used) {
        throw new TypeError('Request.clone: Body has already been consumed.');
      }
      return new Request(this);
    }
    get [Symbol.toStringTag]() {
      return 'Request';
    }
  }

  class Response extends Body {
    constructor(body, init) {
      super();
      init = init || {};
      const status = init.status === undefined ? 200 : Number(init.status);
      if (!init._raw && (!Number.isInteger(status) || status < 200 || status > 599)) {
        throw new RangeError(`Response: the status ${init.status} is not in the range 200 to 599`);
      }
      this.status = status;
      this.statusText = init.statusText === undefined ? '' : String(init.statusText);
      this.url = init.url || '';
      this.redirected = !!init.redirected;
      this.type = init.type || 'default';
      this._init(body === undefined ? null : body, init.headers);
    }
    get ok() {
      return this.status >= 200 && this.status < 300;
    }
    clone() {
      if (this._used) {
        throw new TypeError('Response.clone: Body has already been consumed.');
      }
      return new Response(this._bytes === null ? null : this._bytes.slice(), {
        status: this.status, statusText: this.statusText, headers: this.headers, url: this.url,
        redirected: this.redirected, type: this.type, _raw: true,
      });
    }
    static json(data, init) {
      const r = new Response(JSON.stringify(data), init);
      r.headers.set('content-type', 'application/json');
      return r;
    }
    static error() {
      const r = new Response(null, { status: 200 });
      r.status = 0;
      r.type = 'error';
      return r;
    }
    static redirect(url, status) {
      status = status === undefined ? 302 : status;
      if (![301, 302, 303, 307, 308].includes(status)) {
        throw new RangeError(`Response.redirect: invalid status ${status}`);
      }
      return new Response(null, { status, headers: { location: new URL(url).href } });
    }
    get [Symbol.toStringTag]() {
      return 'Response';
    }
  }

  function fetch(input, init) {
    let req;
    try {
      req = new Request(input, init);
    } catch (e) {
      return Promise.reject(e);
    }
    if (req.signal && req.signal.aborted) {
      return Promise.reject(req.signal.reason || new Error('This operation was aborted'));
    }
    const headers = [];
    req.headers.forEach((v, k) => headers.push([k, v]));
    return native.fetch(req.method, req.url, headers, req._bytes === null ? undefined : req._bytes, req.redirect).then((raw) => {
      const res = new Response(raw.body, {
        status: raw.status, statusText: raw.statusText, headers: raw.headers, url: raw.url,
        redirected: raw.redirected, type: 'basic', _raw: true,
      });
      if (req.method === 'HEAD' || raw.status === 204 || raw.status === 304) {
        res._bytes = null;
      }
      return res;
    });
  }

  // node-fetch's FetchError, for bots that test `err instanceof FetchError` or its name.
  class FetchError extends Error {
    constructor(message, type) {
      super(message);
      this.name = 'FetchError';
      this.type = type;
    }
  }

  const nodeFetch = function (input, init) {
    return fetch(input, init);
  };
  Object.assign(nodeFetch, { default: nodeFetch, Headers, Request, Response, FetchError, FormData, isRedirect: (s) => [301, 302, 303, 307, 308].includes(s) });

  return { fetch, Request, Response, Headers, FormData, nodeFetch };
});
