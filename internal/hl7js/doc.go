// Package hl7js gives goja bots Medplum's HL7 v2 API (Hl7Message,
// Hl7Segment, Hl7Field, Hl7Context, parseHl7DateTime, formatHl7DateTime from
// @medplum/core), backed by package hl7, so Medplum bot code such as
//
//	exports.handler = async (medplum, event) => {
//	  const msg = event.input;
//	  const name = msg.getSegment('PID').getField(5).getComponent(1);
//	  return msg.buildAck({ ackCode: 'AA' });
//	};
//
// runs unchanged.
//
// # Use
//
// A goja runtime is single-goroutine, so everything here is per runtime,
// normally one per bot run:
//
//	hl7js.Install(rt)                // globals Hl7Message, Hl7Segment, Hl7Field, Hl7Context
//	hl7js.DefineExports(rt, exports) // the same classes plus the date helpers on require('@medplum/core')
//	input := hl7js.Wrap(rt, msg)     // a parsed *hl7.Message as the bot's event.input
//	…run the bot…
//	if m, ok := hl7js.Unwrap(rt, result); ok { /* answer m.String() as x-application/hl7-v2+er7 */ }
//
// Install and DefineExports only define accessor properties (a few
// microseconds); the classes are created in a runtime the first time a bot
// touches one of them, or when Wrap is called. Both share that runtime's
// classes, so instanceof works across globals and require.
//
// # Design
//
// The classes are JavaScript (hl7.js, compiled once per process into a
// *goja.Program and evaluated once per runtime on first use), not Go-backed
// host objects: Medplum exposes segments, fields and components as real
// arrays that bots index, map, filter and spread, and goja host objects
// cannot be arrays. Parsing and validation stay in Go: Hl7Message.parse and
// Wrap give the JavaScript message the canonical text (segments joined by CR)
// and an opaque handle to the *hl7.Message, and escape decoding, encoding,
// control ids and dates are Go functions.
//
// goja spends about a microsecond per object or array it creates, and as much
// again to split a string into an array, so the JavaScript objects stay lazy
// and ask Go instead: getSegment('PID') on a 500-segment message finds the
// segment in Go and creates one segment object, getField(5) creates one field
// object, and getComponent reads the field's text in Go without building the
// components arrays. toString() of an unmodified message returns its text, and
// Unwrap of an unmodified message returns the Go message without re-parsing.
// Reading msg.segments, seg.fields or field.components builds the whole array
// once, reusing the objects already handed out; from then on the arrays are
// the truth, as in Medplum.
//
// buildAck of a message as parsed (nothing edited or built, its context the
// one it was parsed with, and the methods buildAck reads through hl7.js's
// own) is built by Go (hl7.Message.BuildAck, the same text) and is Go-backed
// like a parsed message, so the usual ACK bot creates no object per field and
// its answer is not serialised and parsed again. Otherwise buildAck reads the
// message field by field, as Medplum's does.
//
// # Differences from Medplum
//
//   - getComponent decodes escape sequences (\F\ \S\ \T\ \R\ \E\ \Xhh\);
//     setComponent encodes the value, keeping & as the subcomponent separator
//     when no subcomponent index is given. Medplum does neither. toString(),
//     get() of a field and the components arrays hold wire text, as in
//     Medplum, and setField with a string takes wire text (Medplum parses it
//     into components and so do we).
//   - Hl7Message.parse accepts a UTF-8 BOM, MLLP framing, and LF or CRLF line
//     breaks, ignores blank lines, and adds no empty segment for a trailing
//     line break; toString() always joins segments with CR. Invalid input
//     throws Error("Invalid HL7 message: <where and what>") with type
//     'entity.parse.failed', as Medplum's "Invalid HL7 message" does.
//   - buildAck writes MSH-12 2.5.1 when the original MSH-12 is empty (Medplum:
//     only when absent), uses the message's component separator in MSH-9
//     (Medplum always writes ^), uses a 20-digit control id (Unix ms plus 7
//     random digits; Medplum: Date.now()), and throws a TypeError for an
//     unknown ackCode.
//   - toString() is computed from the current arrays, so it shows direct
//     edits (msg.segments.push(seg), field.components[0][1] = 'x') that
//     Medplum's cached strings hide until a setter runs; getSegment(name)
//     and getAllSegments(name) likewise see segments pushed onto the array
//     (Medplum's name index does not).
//   - formatHl7DateTime zero-pads milliseconds (5 ms is ".005", Medplum ".5");
//     parseHl7DateTime reads the fraction as a decimal fraction of a second
//     and returns undefined for malformed input instead of a guess.
//   - segments, fields and components are accessor properties on the
//     prototypes (each read returns the same real array), so Object.keys and
//     object spread do not list them; JSON.stringify goes through toJSON and
//     gives {context, segments: [{context, name, fields: [{context,
//     components}]}]}, without Medplum's private caches.
package hl7js
