// Package mllp reads and writes HL7 v2 messages framed by the Minimal Lower
// Layer Protocol (HL7 v2.5.1 Implementation Guide, appendix C): each message
// is sent as 0x0B, the message, 0x1C, 0x0D. It also builds the
// acknowledgments an MLLP receiver answers with and remembers them for
// duplicate messages. It knows nothing of Caddy, bots or networks beyond
// io.Reader and io.Writer.
package mllp
