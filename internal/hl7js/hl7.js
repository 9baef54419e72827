// Medplum's Hl7Message API (@medplum/core hl7.ts) for goja. Evaluated once per
// runtime, on first use: the script is a function that receives the Go helpers
// (package hl7) and returns the classes.
//
// goja spends about a microsecond per object or array it creates (more for
// every symbol-keyed property), and as much again to split a string into an
// array, so objects built from parsed text stay lazy and ask Go instead:
//
//   - a parsed message holds its text (SRC) and an opaque handle to the Go
//     message (GO); getSegment and getAllSegments ask Go which segments match
//     and create objects only for those, caching them by index (KIDS);
//   - a segment's FIELDS slot holds its text until the fields array is needed;
//     getField creates (and caches in KIDS) only the fields asked for;
//   - a field's COMPS slot holds its text until the components array is
//     needed; getComponent reads the text in Go.
//
// The arrays Medplum exposes (message.segments, segment.fields,
// field.components) are accessors on the prototypes that build the whole array
// on first read, reusing the objects already handed out so that edits made
// through them are kept. toString() is computed from the arrays each time, or
// is the original text while nothing was built, so it always shows edits,
// including direct array edits that Medplum's cached strings would hide.
(function (native) {
  'use strict';

  const SRC = Symbol('hl7.src');
  const GO = Symbol('hl7.go');
  const KIDS = Symbol('hl7.kids');
  const SEGS = Symbol('hl7.segments');
  const FIELDS = Symbol('hl7.fields');
  const COMPS = Symbol('hl7.components');
  const SEGCTX = Symbol('hl7.segmentContext'); // the context of a Go-built ACK's segments
  const CTX0 = Symbol('hl7.parsedContext'); // the context a Go-backed message was made with

  // split is String.prototype.split that treats an empty separator (a
  // delimiter the message did not declare) as "no separator".
  function split(s, sep) {
    return sep === '' ? [s] : s.split(sep);
  }

  function encode(value, ctx, keepSub) {
    if (typeof value !== 'string' || value === '') {
      return value;
    }
    return native.encode(value, ctx.fieldSeparator, ctx.componentSeparator, ctx.repetitionSeparator, ctx.escapeCharacter, ctx.subcomponentSeparator, keepSub);
  }

  function isStringArray(a) {
    if (!Array.isArray(a)) {
      return false;
    }
    for (let i = 0; i < a.length; i++) {
      if (typeof a[i] !== 'string') {
        return false;
      }
    }
    return true;
  }

  // segmentName is Medplum's name of a segment with this text,
  // fields[0].components[0][0]: the text before the first field (unless
  // text is already the first field), repetition or component separator.
  function segmentName(text, ctx, whole = true) {
    let end = text.length;
    let i = !whole || ctx.fieldSeparator === '' ? -1 : text.indexOf(ctx.fieldSeparator);
    if (i >= 0) {
      end = i;
    }
    i = ctx.repetitionSeparator === '' ? -1 : text.indexOf(ctx.repetitionSeparator);
    if (i >= 0 && i < end) {
      end = i;
    }
    i = ctx.componentSeparator === '' ? -1 : text.indexOf(ctx.componentSeparator);
    if (i >= 0 && i < end) {
      end = i;
    }
    return end === text.length ? text : text.slice(0, end);
  }

  // pristine reports whether none of the objects handed out from a lazy
  // object's cache has built an array (and so maybe been edited).
  function pristine(kids) {
    if (kids === undefined) {
      return true;
    }
    for (let i = 0; i < kids.length; i++) {
      const k = kids[i];
      if (k !== undefined && !(k instanceof Hl7Segment ? pristineSegment(k) : typeof k[COMPS] === 'string')) {
        return false;
      }
    }
    return true;
  }

  function pristineSegment(seg) {
    return typeof seg[FIELDS] === 'string' && pristine(seg[KIDS]);
  }

  // NO_SEGMENTS is buildAck's empty list of segments after MSA; never changed.
  const NO_SEGMENTS = [];

  const ACK_TEXT = {
    AA: 'OK',
    AE: 'Application Error',
    AR: 'Application Reject',
    CA: 'Commit Accept',
    CE: 'Commit Error',
    CR: 'Commit Reject',
  };

  class Hl7Context {
    constructor(segmentSeparator = '\r', fieldSeparator = '|', componentSeparator = '^', repetitionSeparator = '~', escapeCharacter = '\\', subcomponentSeparator = '&') {
      this.segmentSeparator = segmentSeparator;
      this.fieldSeparator = fieldSeparator;
      this.componentSeparator = componentSeparator;
      this.repetitionSeparator = repetitionSeparator;
      this.escapeCharacter = escapeCharacter;
      this.subcomponentSeparator = subcomponentSeparator;
    }

    getMsh1() {
      return this.fieldSeparator;
    }

    getMsh2() {
      return this.componentSeparator + this.repetitionSeparator + this.escapeCharacter + this.subcomponentSeparator;
    }
  }

  class Hl7Message {
    constructor(segments, context = new Hl7Context()) {
      this.context = context;
      this[SEGS] = segments;
    }

    get segments() {
      return messageSegments(this);
    }

    set segments(v) {
      this[SEGS] = v;
    }

    get header() {
      return this.getSegment(0);
    }

    get(index) {
      return this.getSegment(index);
    }

    getAll(name) {
      return this.getAllSegments(name);
    }

    getSegment(index) {
      const segs = this[SEGS];
      if (segs !== undefined) {
        if (typeof index === 'number') {
          return segs[index];
        }
        for (let i = 0; i < segs.length; i++) {
          if (segs[i].name === index) {
            return segs[i];
          }
        }
        return undefined;
      }
      if (typeof index === 'number') {
        return Number.isInteger(index) ? lazySegment(this, index, undefined) : undefined;
      }
      if (typeof index !== 'string') {
        return undefined;
      }
      const ctx = segmentContext(this);
      const i = native.find(this[GO], index, ctx.repetitionSeparator, ctx.componentSeparator);
      return i < 0 ? undefined : lazySegment(this, i, index);
    }

    getAllSegments(name) {
      const out = [];
      const segs = this[SEGS];
      if (segs !== undefined) {
        for (let i = 0; i < segs.length; i++) {
          if (segs[i].name === name) {
            out.push(segs[i]);
          }
        }
        return out;
      }
      if (typeof name !== 'string') {
        return out;
      }
      const ctx = segmentContext(this);
      const found = native.findAll(this[GO], name, ctx.repetitionSeparator, ctx.componentSeparator);
      for (let i = 0; i < found.length; i++) {
        out.push(lazySegment(this, found[i], name));
      }
      return out;
    }

    toString() {
      if (this[SEGS] === undefined && pristine(this[KIDS])) {
        return this[SRC];
      }
      const segs = messageSegments(this);
      const parts = [];
      for (let i = 0; i < segs.length; i++) {
        parts.push(segs[i].toString());
      }
      return parts.join(this.context.segmentSeparator);
    }

    toJSON() {
      return { context: this.context, segments: this.segments };
    }

    buildAck(options) {
      const now = new Date();
      if (this.getSegment !== ownGetSegment || !asParsed(this)) {
        const msh = this.getSegment('MSH');
        const ackCode = options?.ackCode ?? 'AA';
        const text = ACK_TEXT[ackCode];
        if (typeof text !== 'string') {
          throw new TypeError('Invalid ackCode: ' + ackCode);
        }
        return ackFromFields(msh, this.context, now, ackCode, text, () => (options?.errSegment ? [options.errSegment] : NO_SEGMENTS));
      }
      // The message reads as parsed, through hl7.js's own methods (so reading its MSH first, as
      // above, would show nothing): Go builds the same ACK text without a JavaScript object per
      // field, and the ACK is Go-backed, so a bot returning it is answered without serialising
      // and parsing it again.
      const ackCode = options?.ackCode ?? 'AA';
      const text = ACK_TEXT[ackCode];
      if (typeof text !== 'string') {
        throw new TypeError('Invalid ackCode: ' + ackCode);
      }
      const errs = options?.errSegment ? [options.errSegment] : NO_SEGMENTS;
      if (errs.length === 0) {
        const r = native.ack(this[GO], ackCode, now.getTime());
        if (r !== undefined) {
          return ackFromGo(r[0], r[1], this.context);
        }
      }
      return ackFromFields(this.getSegment('MSH'), this.context, now, ackCode, text, () => errs);
    }

    setSegment(index, segment) {
      const segs = messageSegments(this);
      if (segment.name === 'MSH') {
        const at = typeof index === 'number' ? index : segs.findIndex((s) => s.name === index);
        if (at !== 0) {
          return false;
        }
      } else if (index === 0) {
        return false;
      }
      let at;
      if (typeof index === 'number') {
        at = index >= segs.length ? segs.length : index;
      } else {
        at = segs.findIndex((s) => s.name === index);
        if (at === -1 || (at === 0 && segment.name !== 'MSH')) {
          return false;
        }
      }
      segs[at] = segment;
      return true;
    }

    static parse(text) {
      const r = native.parse(String(text));
      if (typeof r === 'string') {
        const err = new Error('Invalid HL7 message: ' + r);
        err.type = 'entity.parse.failed';
        throw err;
      }
      return messageFromGo(r[0], r[1], r[2], r[3]);
    }
  }

  function messageFromGo(handle, text, msh1, msh2) {
    const msg = Object.create(Hl7Message.prototype);
    msg.context = msg[CTX0] = new Hl7Context('\r', msh1, msh2.charAt(0), msh2.charAt(1), msh2.charAt(2), msh2.charAt(3));
    msg[GO] = handle;
    msg[SRC] = text;
    return msg;
  }

  // ackFromFields is buildAck's ACK of the message whose MSH is msh, read field by field:
  // Medplum's buildAck. errs returns the segments to append after MSA.
  function ackFromFields(msh, ctx, now, ackCode, text, errs) {
    const field = (i) => msh?.getField(i)?.toString() ?? '';
    return new Hl7Message([
      new Hl7Segment(
        [
          'MSH',
          ctx.getMsh2(),
          field(5),
          field(6),
          field(3),
          field(4),
          native.formatDateTime(now.getTime()),
          '',
          ackMessageType(msh, ctx),
          native.controlId(now.getTime()),
          'P',
          field(12) || '2.5.1',
        ],
        ctx
      ),
      new Hl7Segment(['MSA', ackCode, field(10), text], ctx),
      ...errs(),
    ]);
  }

  // ackFromGo is the ACK Go built (handle and text) as ackFromFields would give it: a message
  // with a default context whose segments have ctx, the original message's.
  function ackFromGo(handle, text, ctx) {
    const msg = Object.create(Hl7Message.prototype);
    msg.context = new Hl7Context();
    msg[SEGCTX] = ctx;
    msg[GO] = handle;
    msg[SRC] = text;
    return msg;
  }

  // asParsed reports whether what ackFromFields reads of msg, a message whose getSegment is
  // hl7.js's own, is what Go parsed: msg is Go-backed and unchanged, its context is the one it
  // was parsed with (four encoding characters, as on the wire), its MSH (if a bot has it) is as
  // made, and the methods and accessors ackFromFields calls are hl7.js's own. It runs no code of
  // the bot's (no getters, traps or Symbol.hasInstance): it reads only objects hl7.js made.
  function asParsed(msg) {
    const ctx = msg.context;
    if (msg[GO] === undefined || msg[SEGS] !== undefined || ctx !== msg[CTX0] || !pristine(msg[KIDS]) || ctx.getMsh2 !== ownGetMsh2) {
      return false;
    }
    const msh2 = ctx.getMsh2();
    if (typeof msh2 !== 'string' || msh2.length !== 4 || !msg[SRC].startsWith('MSH' + ctx.fieldSeparator + msh2 + ctx.fieldSeparator)) {
      return false;
    }
    const comps = Object.getOwnPropertyDescriptor(Hl7Field.prototype, 'components');
    if (Hl7Field.prototype.toString !== ownFieldToString || comps === undefined || comps.get !== ownComponents) {
      return false;
    }
    // The MSH is segment 0; getSegment('MSH') hands out the one cached there, or makes one.
    const msh = msg[KIDS]?.[0];
    if (msh === undefined) {
      return Hl7Segment.prototype.getField === ownGetField;
    }
    if (msh.context !== ctx || msh.getField !== ownGetField) {
      return false;
    }
    const kids = msh[KIDS];
    for (let i = 0; kids !== undefined && i < kids.length; i++) {
      const f = kids[i];
      if (f !== undefined && (Object.getPrototypeOf(f) !== Hl7Field.prototype || Object.getOwnPropertyNames(f).length !== 1)) {
        return false; // a field handed out earlier has properties of its own beyond its context
      }
    }
    return true;
  }

  // segmentContext is the context of the segments made from msg's text: a Go-built ACK's is
  // the acknowledged message's, as for the segments buildAck constructs, and otherwise msg's.
  function segmentContext(msg) {
    return msg[SEGCTX] ?? msg.context;
  }

  // messageSegments returns msg's segments array, building it on first use.
  function messageSegments(msg) {
    let segs = msg[SEGS];
    if (segs === undefined) {
      const ctx = segmentContext(msg);
      const lines = msg[SRC].split('\r');
      const names = native.names(msg[GO], ctx.repetitionSeparator, ctx.componentSeparator);
      const kids = msg[KIDS];
      segs = [];
      for (let i = 0; i < lines.length; i++) {
        segs.push((kids !== undefined && kids[i]) || segmentFromText(lines[i], names[i], ctx));
      }
      msg[SEGS] = segs;
      msg[KIDS] = undefined;
    }
    return segs;
  }

  // lazySegment returns segment i (an integer) of a message whose array is
  // not built yet, or undefined. name is its name when the caller knows it.
  function lazySegment(msg, i, name) {
    const kids = msg[KIDS] ?? (msg[KIDS] = []);
    let seg = kids[i];
    if (seg === undefined) {
      const line = native.line(msg[GO], i);
      if (line === undefined) {
        return undefined;
      }
      const ctx = segmentContext(msg);
      seg = kids[i] = segmentFromText(line, name ?? segmentName(line, ctx), ctx);
    }
    return seg;
  }

  // ackMessageType mirrors the original MSH-9: ACK, ACK^<trigger> or
  // ACK^<trigger>^ACK, using the components as sent.
  function ackMessageType(msh, ctx) {
    const rep = msh?.getField(9)?.components[0] ?? [];
    const trigger = rep[1] ?? '';
    const structure = rep[2] ?? '';
    const cs = ctx.componentSeparator;
    if (trigger && structure) {
      return 'ACK' + cs + trigger + cs + 'ACK';
    }
    return trigger ? 'ACK' + cs + trigger : 'ACK';
  }

  class Hl7Segment {
    constructor(fields, context = new Hl7Context()) {
      this.context = context;
      if (isStringArray(fields)) {
        const parsed = [];
        for (let i = 0; i < fields.length; i++) {
          parsed.push(fieldFromText(fields[i], context));
        }
        this[FIELDS] = parsed;
        this.name = segmentName(fields[0], context, false);
      } else {
        this[FIELDS] = fields;
        this.name = fields[0].components[0][0];
      }
    }

    get fields() {
      return segmentFields(this);
    }

    set fields(v) {
      this[FIELDS] = v;
    }

    get(index) {
      return fieldAt(this, index);
    }

    getField(index) {
      if (this.name === 'MSH') {
        if (index === 1) {
          return new Hl7Field([[this.context.getMsh1()]], this.context);
        }
        if (index === 2) {
          return new Hl7Field([[this.context.getMsh2()]], this.context);
        }
        if (index > 2) {
          return fieldAt(this, index - 1);
        }
      }
      return fieldAt(this, index);
    }

    getComponent(fieldIndex, component, subcomponent, repetition = 0) {
      return this.getField(fieldIndex)?.getComponent(component, subcomponent, repetition) ?? '';
    }

    toString() {
      const f = this[FIELDS];
      if (typeof f === 'string' && pristine(this[KIDS])) {
        return f;
      }
      const fields = segmentFields(this);
      const parts = [];
      for (let i = 0; i < fields.length; i++) {
        parts.push(fields[i].toString());
      }
      return parts.join(this.context.fieldSeparator);
    }

    toJSON() {
      return { context: this.context, name: this.name, fields: this.fields };
    }

    setField(index, field) {
      let at = index;
      if (this.name === 'MSH') {
        if (index === 1 || index === 2) {
          return false;
        }
        if (index > 2) {
          at = index - 1;
        }
      }
      const fields = segmentFields(this);
      while (fields.length <= at) {
        fields.push(new Hl7Field([['']], this.context));
      }
      fields[at] = typeof field === 'string' ? fieldFromText(field, this.context) : field;
      return true;
    }

    setComponent(fieldIndex, component, value, subcomponent, repetition = 0) {
      const field = this.getField(fieldIndex);
      if (!field) {
        return false;
      }
      return field.setComponent(component, value, subcomponent, repetition);
    }

    static parse(text, context = new Hl7Context()) {
      return segmentFromText(text, segmentName(text, context), context);
    }
  }

  function segmentFromText(text, name, ctx) {
    const seg = Object.create(Hl7Segment.prototype);
    seg.context = ctx;
    seg.name = name;
    seg[FIELDS] = text;
    return seg;
  }

  // segmentFields returns seg's fields array, building it on first use.
  function segmentFields(seg) {
    let fields = seg[FIELDS];
    if (typeof fields === 'string') {
      const parts = split(fields, seg.context.fieldSeparator);
      const kids = seg[KIDS];
      fields = [];
      for (let i = 0; i < parts.length; i++) {
        fields.push((kids !== undefined && kids[i]) || fieldFromText(parts[i], seg.context));
      }
      seg[FIELDS] = fields;
      seg[KIDS] = undefined;
    }
    return fields;
  }

  // fieldAt is seg.fields[i] without building the whole array.
  function fieldAt(seg, i) {
    const text = seg[FIELDS];
    if (typeof text !== 'string') {
      return text[i];
    }
    if (!Number.isInteger(i)) {
      return segmentFields(seg)[i]; // keep JavaScript's indexing quirks ('3', 1.5)
    }
    const kids = seg[KIDS] ?? (seg[KIDS] = []);
    let f = kids[i];
    if (f === undefined) {
      const ft = native.field(text, i, seg.context.fieldSeparator);
      if (ft === undefined) {
        return undefined;
      }
      f = kids[i] = fieldFromText(ft, seg.context);
    }
    return f;
  }

  class Hl7Field {
    constructor(components, context = new Hl7Context()) {
      this.context = context;
      this[COMPS] = components;
    }

    get components() {
      return fieldComponents(this);
    }

    set components(v) {
      this[COMPS] = v;
    }

    get(component, subcomponent, repetition = 0) {
      return this.getComponent(component + 1, subcomponent, repetition);
    }

    getComponent(component, subcomponent, repetition = 0) {
      const ctx = this.context;
      const text = this[COMPS];
      if (typeof text === 'string' && Number.isInteger(component) && Number.isInteger(repetition) && (subcomponent === undefined || (Number.isInteger(subcomponent) && subcomponent >= 0))) {
        // Answer from the text in Go: building the arrays here costs ten
        // times as much.
        const v = native.component(text, component, subcomponent ?? -1, repetition, ctx.fieldSeparator, ctx.componentSeparator, ctx.repetitionSeparator, ctx.escapeCharacter, ctx.subcomponentSeparator);
        if (typeof v === 'string') {
          return v;
        }
        if (v === null) {
          // Medplum reads components[repetition][component - 1].
          throw new TypeError("Cannot read properties of undefined (reading '" + (component - 1) + "')");
        }
        // undefined: separators Go cannot use; fall back below.
      }
      let value = fieldComponents(this)[repetition][component - 1] ?? '';
      if (subcomponent !== undefined) {
        value = split(value, ctx.subcomponentSeparator)[subcomponent] ?? '';
      }
      const e = ctx.escapeCharacter;
      if (typeof value !== 'string' || e === '' || value.indexOf(e) < 0) {
        return value;
      }
      return native.decode(value, ctx.fieldSeparator, ctx.componentSeparator, ctx.repetitionSeparator, e, ctx.subcomponentSeparator);
    }

    toString() {
      const comps = this[COMPS];
      if (typeof comps === 'string') {
        return comps;
      }
      const ctx = this.context;
      const reps = [];
      for (let i = 0; i < comps.length; i++) {
        reps.push(comps[i].join(ctx.componentSeparator));
      }
      return reps.join(ctx.repetitionSeparator);
    }

    toJSON() {
      return { context: this.context, components: this.components };
    }

    setComponent(component, value, subcomponent, repetition = 0) {
      if (component < 1) {
        return false;
      }
      const ctx = this.context;
      const comps = fieldComponents(this);
      while (comps.length <= repetition) {
        comps.push(['']);
      }
      if (subcomponent === undefined) {
        comps[repetition][component - 1] = encode(value, ctx, true);
      } else if (subcomponent < 0) {
        return false;
      } else {
        const subs = split(comps[repetition][component - 1] || '', ctx.subcomponentSeparator);
        while (subs.length <= subcomponent) {
          subs.push('');
        }
        subs[subcomponent] = encode(value, ctx, false);
        comps[repetition][component - 1] = subs.join(ctx.subcomponentSeparator);
      }
      return true;
    }

    static parse(text, context = new Hl7Context()) {
      return fieldFromText(text, context);
    }
  }

  function fieldFromText(text, ctx) {
    const f = Object.create(Hl7Field.prototype);
    f.context = ctx;
    f[COMPS] = text;
    return f;
  }

  // fieldComponents returns f's components array, building it on first use.
  function fieldComponents(f) {
    let comps = f[COMPS];
    if (typeof comps === 'string') {
      const ctx = f.context;
      const reps = split(comps, ctx.repetitionSeparator);
      comps = [];
      for (let i = 0; i < reps.length; i++) {
        comps.push(split(reps[i], ctx.componentSeparator));
      }
      f[COMPS] = comps;
    }
    return comps;
  }

  function parseHl7DateTime(hl7DateTime, options) {
    if (!hl7DateTime) {
      return undefined;
    }
    return native.parseDateTime(String(hl7DateTime), String(options?.tzOffset ?? ''));
  }

  function formatHl7DateTime(isoDate) {
    const date = isoDate instanceof Date ? isoDate : new Date(isoDate);
    const ms = date.getTime();
    if (Number.isNaN(ms)) {
      throw new RangeError('Invalid time value');
    }
    return native.formatDateTime(ms);
  }

  // What buildAck and asParsed compare with: hl7.js's own methods and accessor.
  const ownGetSegment = Hl7Message.prototype.getSegment;
  const ownGetMsh2 = Hl7Context.prototype.getMsh2;
  const ownGetField = Hl7Segment.prototype.getField;
  const ownFieldToString = Hl7Field.prototype.toString;
  const ownComponents = Object.getOwnPropertyDescriptor(Hl7Field.prototype, 'components').get;

  return {
    Hl7Context,
    Hl7Message,
    Hl7Segment,
    Hl7Field,
    parseHl7DateTime,
    formatHl7DateTime,
    messageFromGo,
    toString: Hl7Message.prototype.toString,
    handleOf: (msg) => msg[GO],
  };
});
