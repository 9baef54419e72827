// Package hl7 parses, reads, edits and serialises HL7 v2 messages (ER7, the
// pipe-and-hat encoding). It has no dependencies beyond the standard library.
//
// It is the Go side of fhirgate's Medplum compatibility: package hl7js exposes
// it to bots as Medplum's Hl7Message API, and the bot runner uses it to parse
// `x-application/hl7-v2+er7` request bodies and to serialise Hl7Message
// results.
//
// # Parsing
//
// [Parse] takes the delimiters from MSH-1 and MSH-2, so any field separator
// (`|`, `#`, `_`, …) and any encoding characters work. Segments end at CR, LF
// or CRLF; blank lines are ignored and a trailing line break does not create
// an empty segment (Medplum's parser does). A leading UTF-8 BOM, MLLP framing
// (0x0B … 0x1C 0x0D) and leading line breaks are skipped; anything else must
// start with "MSH", otherwise Parse returns a [*ParseError] that names the
// line and byte offset.
//
// Parsing records where every segment starts, as int32 offsets into the
// input: it counts the segments, then allocates their offsets once (three
// allocations per message whatever its size, with the Message and a small
// cache), plus a copy of the text joined with CRs when the input did not use
// single CRs. What Parse allocates is thus at most 3× its input for any
// shape (two-byte segments separated by LF: 2× for the offsets, 1× for the
// copy), 2× for two-byte segments separated by CR, almost nothing for a
// segment of a million empty fields, and for typical messages a few hundred
// bytes plus 4 per segment (2% of a 1 MiB batch of ADT and ORU segments), so
// a large or hostile body costs about its own size. Where the fields of a
// segment end is found when the segment is first read and kept for up to 64
// recently read segments. Components, repetitions and subcomponents are
// found on demand by scanning the field, and escape sequences are decoded
// only when a value contains the escape character, so reading most values
// allocates nothing. Setters keep unchanged segments as offsets: changed
// segments are held apart until they number more than a sixteenth of the
// message, then folded into a new text.
//
// # Serialising
//
// [Message.String] joins the segments with CR, as HL7 prescribes, without a
// trailing CR. Each segment is reproduced byte for byte. For input that
// already used single CRs String returns the input itself (no copy) until the
// message is modified; for other input Parse joins the segments once.
// [Message.Raw] returns the input with its original line breaks (after BOM
// and MLLP stripping).
//
// # Escape sequences
//
// Accessors that return a value ([Field.Component], [Segment.Component])
// decode `\F\ \S\ \T\ \R\ \E\` (and `\P\` when MSH-2 declares a truncation
// character) and `\Xhh…\`; other sequences (`\H\ \N\ \.br\ \Cxxyy\ …`) are
// formatting instructions for the receiver and pass through unchanged. The
// String methods return encoded wire text. Setters that take a value
// ([Segment.SetField], [Field.SetComponent], [Message.AppendSegment]) encode
// it, and also encode CR and LF as `\X0D\` and `\X0A\` so a value can never
// split a segment. Setters whose name ends in Raw take wire text.
//
// A whole component read with subcomponent [Whole] keeps the subcomponent
// separator: "A&B" and "A\T\B" both read as "A&B". Symmetrically, setting a
// whole component keeps `&` as a separator; set one subcomponent to store a
// literal `&`.
//
// # Medplum mapping
//
// Indexes follow Medplum's Hl7Message so that code ports line by line:
//
//	Medplum (JavaScript)                      hl7 (Go)
//	Hl7Message.parse(text)                    Parse(text)
//	msg.segments / msg.header                 Message.Segments(), SegmentAt(i), NumSegments() / Header()
//	msg.getSegment('PID')                     Message.Segment("PID")
//	msg.getAllSegments('OBX')                 Message.AllSegments("OBX")
//	msg.setSegment(i | name, seg)             Message.SetSegment(i, raw), SetSegmentByName(name, raw)
//	msg.toString()                            Message.String()
//	msg.buildAck({ackCode, errSegment})       Message.BuildAck(AckOptions{Code, ErrSegment})
//	seg.name / seg.toString()                 Segment.Name() / Segment.String()
//	seg.getField(i)                           Segment.Field(i): 1-based, MSH-1 and MSH-2 synthetic
//	seg.getComponent(f, c, sub?, rep = 0)     Segment.Component(f, c, sub, rep), sub = Whole for "absent"
//	seg.setField(i, value)                    Segment.SetField(i, value) (encodes), SetFieldRaw(i, raw)
//	seg.setComponent(f, c, v, sub?, rep = 0)  Segment.SetComponent(f, c, v, sub, rep)
//	field.getComponent(c, sub?, rep = 0)      Field.Component(c, sub, rep): c 1-based, sub and rep 0-based
//	field.setComponent(c, v, sub?, rep = 0)   (*Field).SetComponent(c, v, sub, rep)
//	field.toString()                          Field.String()
//	field.components.length                   Field.Repetitions()
//	parseHl7DateTime / formatHl7DateTime      ParseDateTime / FormatDateTime
//
// Differences from Medplum: values are escape-decoded on read and encoded on
// write (Medplum does neither); out-of-range repetitions read as "" instead
// of throwing; a trailing line break adds no segment; BOM and MLLP framing
// are accepted; String always uses CR; FormatDateTime zero-pads milliseconds
// and ParseDateTime reads the fraction as a decimal fraction of a second.
//
// # Concurrency
//
// A parsed message may be read from many goroutines: the only thing
// readers write is the cache of field boundaries, with atomic operations.
// Changing a message needs exclusive access, and so does the first String
// call after a change (it caches the joined text).
package hl7
