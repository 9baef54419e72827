// Medplum's Hl7Message API (@medplum/core hl7.ts) for goja. Evaluated once per
// runtime, on first use: the script is a function that receives the Go helpers
// (package hl7) and returns the classes.
//
// Laziness, because goja spends about a microsecond per object: objects built
// from parsed text keep it under RAW and split it only when asked. A message
// splits its lines (LINES) and creates a segment object only for the segments
// a bot touches (KIDS); the same goes for a segment's fields. The arrays Medplum
// exposes (message.segments, segment.fields, field.components) are accessors
// on the prototypes that build the full array on first read (SEGS, FIELDS,
// COMPS), reusing the objects already handed out so that edits made through
// them are kept. RAW doubles as the toString() cache: a setter clears it on
// the object and its owners (OWNER chain); the split text survives in
// LINES/PARTS/COMPS, which every path fills before it can change anything.
// Hot paths use plain loops: goja's iterators and closures are slow.
(function (native) {
  'use strict';

  const RAW = Symbol('hl7.raw');
  const OWNER = Symbol('hl7.owner');
  const LINES = Symbol('hl7.lines');
  const PARTS = Symbol('hl7.parts');
  const KIDS = Symbol('hl7.kids');
  const SEGS = Symbol('hl7.segments');
  const FIELDS = Symbol('hl7.fields');
  const COMPS = Symbol('hl7.components');

  // split is String.prototype.split that treats an empty separator (a
  // delimiter the message did not declare) as "no separator".
  function split(s, sep) {
    return sep === '' ? [s] : s.split(sep);
  }

  function invalidate(obj) {
    for (let o = obj; o !== undefined; o = o[OWNER]) {
      o[RAW] = undefined;
    }
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

  function isIndex(i, length) {
    return Number.isInteger(i) && i >= 0 && i < length;
  }

  // cut returns s up to the first sep, if sep is declared.
  function cut(s, sep) {
    const i = sep === '' ? -1 : s.indexOf(sep);
    return i < 0 ? s : s.slice(0, i);
  }

  // fieldName is Medplum's name of a segment whose first field is text:
  // fields[0].components[0][0].
  function fieldName(text, ctx) {
    return cut(cut(text, ctx.repetitionSeparator), ctx.componentSeparator);
  }

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
      for (let i = 0; i < segments.length; i++) {
        if (segments[i] instanceof Hl7Segment) {
          segments[i][OWNER] = this;
        }
      }
    }

    get segments() {
      return messageSegments(this);
    }

    set segments(v) {
      messageSegments(this);
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
      const lines = this[LINES] ?? (this[LINES] = this[RAW].split('\r'));
      if (typeof index === 'number') {
        return isIndex(index, lines.length) ? lazySegment(this, index) : undefined;
      }
      if (typeof index !== 'string') {
        return undefined;
      }
      for (let i = 0; i < lines.length; i++) {
        if (lines[i].startsWith(index) && lineName(lines[i], this.context) === index) {
          return lazySegment(this, i);
        }
      }
      return undefined;
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
      const lines = this[LINES] ?? (this[LINES] = this[RAW].split('\r'));
      if (typeof name !== 'string') {
        return out;
      }
      for (let i = 0; i < lines.length; i++) {
        if (lines[i].startsWith(name) && lineName(lines[i], this.context) === name) {
          out.push(lazySegment(this, i));
        }
      }
      return out;
    }

    toString() {
      if (this[RAW] === undefined) {
        const segs = messageSegments(this);
        const parts = [];
        for (let i = 0; i < segs.length; i++) {
          parts.push(segs[i].toString());
        }
        this[RAW] = parts.join(this.context.segmentSeparator);
      }
      return this[RAW];
    }

    toJSON() {
      return { context: this.context, segments: this.segments };
    }

    buildAck(options) {
      const now = new Date();
      const msh = this.getSegment('MSH');
      const field = (i) => msh?.getField(i)?.toString() ?? '';
      const ackCode = options?.ackCode ?? 'AA';
      const text = ACK_TEXT[ackCode];
      if (typeof text !== 'string') {
        throw new TypeError('Invalid ackCode: ' + ackCode);
      }
      return new Hl7Message([
        new Hl7Segment(
          [
            'MSH',
            this.context.getMsh2(),
            field(5),
            field(6),
            field(3),
            field(4),
            native.formatDateTime(now.getTime()),
            '',
            ackMessageType(msh, this.context),
            native.controlId(now.getTime()),
            'P',
            field(12) || '2.5.1',
          ],
          this.context
        ),
        new Hl7Segment(['MSA', ackCode, field(10), text], this.context),
        ...(options?.errSegment ? [options.errSegment] : []),
      ]);
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
      segment[OWNER] = this;
      invalidate(this);
      return true;
    }

    static parse(text) {
      const r = native.parse(String(text));
      if (typeof r === 'string') {
        const err = new Error('Invalid HL7 message: ' + r);
        err.type = 'entity.parse.failed';
        throw err;
      }
      return messageFromRaw(r[0], r[1], r[2]);
    }
  }

  // lineName is the name of the segment a line of wire text would make:
  // the text before the first field, repetition or component separator.
  // Written out because JavaScript calls are the expensive part in goja.
  function lineName(line, ctx) {
    let end = line.length;
    const fs = ctx.fieldSeparator;
    const rs = ctx.repetitionSeparator;
    const cs = ctx.componentSeparator;
    let i = fs === '' ? -1 : line.indexOf(fs);
    if (i >= 0) {
      end = i;
    }
    i = rs === '' ? -1 : line.indexOf(rs);
    if (i >= 0 && i < end) {
      end = i;
    }
    i = cs === '' ? -1 : line.indexOf(cs);
    if (i >= 0 && i < end) {
      end = i;
    }
    return end === line.length ? line : line.slice(0, end);
  }

  // messageSegments returns msg's segments array, building it on first use.
  function messageSegments(msg) {
    let segs = msg[SEGS];
    if (segs === undefined) {
      const lines = msg[LINES] ?? msg[RAW].split('\r');
      const kids = msg[KIDS];
      segs = [];
      for (let i = 0; i < lines.length; i++) {
        segs.push((kids !== undefined && kids[i]) || segmentFromRaw(lines[i], msg.context, msg));
      }
      msg[SEGS] = segs;
      msg[LINES] = undefined;
      msg[KIDS] = undefined;
    }
    return segs;
  }

  // lazySegment returns segment i of a message whose array is not built yet.
  function lazySegment(msg, i) {
    const kids = msg[KIDS] ?? (msg[KIDS] = []);
    return kids[i] ?? (kids[i] = segmentFromRaw(msg[LINES][i], msg.context, msg));
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

  function messageFromRaw(text, msh1, msh2) {
    const msg = Object.create(Hl7Message.prototype);
    msg.context = new Hl7Context('\r', msh1, msh2.charAt(0), msh2.charAt(1), msh2.charAt(2), msh2.charAt(3));
    msg[RAW] = text;
    return msg;
  }

  class Hl7Segment {
    constructor(fields, context = new Hl7Context()) {
      this.context = context;
      if (isStringArray(fields)) {
        const parsed = [];
        for (let i = 0; i < fields.length; i++) {
          parsed.push(fieldFromRaw(fields[i], context, this));
        }
        this[FIELDS] = parsed;
        this.name = fieldName(fields[0], context);
      } else {
        this[FIELDS] = fields;
        this.name = fields[0].components[0][0];
        for (let i = 0; i < fields.length; i++) {
          if (fields[i] instanceof Hl7Field) {
            fields[i][OWNER] = this;
          }
        }
      }
    }

    get fields() {
      return segmentFields(this);
    }

    set fields(v) {
      segmentFields(this);
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
      if (this[RAW] === undefined) {
        const fields = segmentFields(this);
        const parts = [];
        for (let i = 0; i < fields.length; i++) {
          parts.push(fields[i].toString());
        }
        this[RAW] = parts.join(this.context.fieldSeparator);
      }
      return this[RAW];
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
        fields.push(fieldFromRaw('', this.context, this));
      }
      const f = typeof field === 'string' ? fieldFromRaw(field, this.context, this) : field;
      fields[at] = f;
      if (f instanceof Hl7Field) {
        f[OWNER] = this;
      }
      invalidate(this);
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
      return segmentFromRaw(text, context, undefined);
    }
  }

  function segmentFromRaw(text, ctx, owner) {
    const seg = Object.create(Hl7Segment.prototype);
    seg.context = ctx;
    seg.name = lineName(text, ctx);
    seg[RAW] = text;
    seg[OWNER] = owner;
    return seg;
  }

  // segmentFields returns seg's fields array, building it on first use.
  function segmentFields(seg) {
    let fields = seg[FIELDS];
    if (fields === undefined) {
      const parts = seg[PARTS] ?? split(seg[RAW], seg.context.fieldSeparator);
      const kids = seg[KIDS];
      fields = [];
      for (let i = 0; i < parts.length; i++) {
        fields.push((kids !== undefined && kids[i]) || fieldFromRaw(parts[i], seg.context, seg));
      }
      seg[FIELDS] = fields;
      seg[PARTS] = undefined;
      seg[KIDS] = undefined;
    }
    return fields;
  }

  // fieldAt is seg.fields[i] without building the whole array.
  function fieldAt(seg, i) {
    const fields = seg[FIELDS];
    if (fields !== undefined) {
      return fields[i];
    }
    const parts = seg[PARTS] ?? (seg[PARTS] = split(seg[RAW], seg.context.fieldSeparator));
    if (!isIndex(i, parts.length)) {
      return Number.isInteger(i) ? undefined : segmentFields(seg)[i]; // keep JS indexing quirks ('3', 1.5)
    }
    const kids = seg[KIDS] ?? (seg[KIDS] = []);
    return kids[i] ?? (kids[i] = fieldFromRaw(parts[i], seg.context, seg));
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
      let value = (this[COMPS] ?? fieldComponents(this))[repetition][component - 1] ?? '';
      if (subcomponent !== undefined) {
        value = split(value, ctx.subcomponentSeparator)[subcomponent] ?? '';
      }
      // Decode only values holding the escape character: a Go call per
      // value would dominate the hot path of bots that read messages.
      const e = ctx.escapeCharacter;
      if (typeof value !== 'string' || e === '' || value.indexOf(e) < 0) {
        return value;
      }
      return native.decode(value, ctx.fieldSeparator, ctx.componentSeparator, ctx.repetitionSeparator, e, ctx.subcomponentSeparator);
    }

    toString() {
      if (this[RAW] === undefined) {
        const ctx = this.context;
        const comps = this[COMPS];
        const reps = [];
        for (let i = 0; i < comps.length; i++) {
          reps.push(comps[i].join(ctx.componentSeparator));
        }
        this[RAW] = reps.join(ctx.repetitionSeparator);
      }
      return this[RAW];
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
      invalidate(this);
      return true;
    }

    static parse(text, context = new Hl7Context()) {
      return fieldFromRaw(text, context, undefined);
    }
  }

  function fieldFromRaw(text, ctx, owner) {
    const f = Object.create(Hl7Field.prototype);
    f.context = ctx;
    f[RAW] = text;
    f[OWNER] = owner;
    return f;
  }

  // fieldComponents returns f's components array, building it on first use.
  function fieldComponents(f) {
    let comps = f[COMPS];
    if (comps === undefined) {
      const ctx = f.context;
      const reps = split(f[RAW], ctx.repetitionSeparator);
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

  return {
    Hl7Context,
    Hl7Message,
    Hl7Segment,
    Hl7Field,
    parseHl7DateTime,
    formatHl7DateTime,
    messageFromRaw,
    toString: Hl7Message.prototype.toString,
  };
});
