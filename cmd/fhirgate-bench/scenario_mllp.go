package main

import (
	"context"
	"fmt"
	"net/http"
)

// hl7AckBot is the HL7 bot of scenario 7: it acknowledges what it gets.
const hl7AckBot = "hl7ack"

// hl7AckBotCode answers a message with the ACK built from it, as
// Medplum's HL7 bots do.
const hl7AckBotCode = "export async function handler(medplum, event) {\n  return event.input.buildAck();\n}\n"

// hl7Input is scenario 7's message; {seq} makes every MSH-10 distinct, so
// no message is answered from the duplicate memory.
const hl7Input = "MSH|^~\\&|LAB|NORTH|EHR|CLINIC|20260101120000||ORU^R01^ORU_R01|BENCH{seq}|P|2.5.1\r" +
	"PID|1||123^^^MRN||DOE^JANE||19800101|F\r" +
	"OBR|1||LAB1|8867-4^Heart rate^LN\r" +
	"OBX|1|NM|8867-4^Heart rate^LN||72|/min|||||F"

// mllpScenario is scenario 7: the same HL7 bot fed over MLLP (each
// connection sending back to back) and over HTTP $execute, in one run.
func (h *harness) mllpScenario(ctx context.Context, m *mainInstance) (*scenario, error) {
	s := &scenario{ID: 7, Title: "HL7 over MLLP vs HTTP $execute (ACK bot)"}
	c := h.set.Concurrency
	if m.executeNote != "" {
		s.Measurements = append(s.Measurements, &measurement{Name: "HL7 ACK bot", Unavailable: m.executeNote})
		s.Checks = append(s.Checks, unavailableCheck("MLLP messages/s ÷ $execute", ">=", 1.0, "", "bot not measured"),
			unavailableCheck("MLLP p99 ACK latency", "<=", 10, "ms", "bot not measured"))
		return s, nil
	}
	hd := bearer(m.token)
	hd["Content-Type"] = "x-application/hl7-v2+er7"
	overHTTP := requestSpec{Method: http.MethodPost, URL: executeURL(m.p.sites.gateway, hl7AckBot), Header: hd, Body: hl7Input}
	overMLLP := requestSpec{Method: methodMLLP, URL: "mllp://" + m.p.sites.mllp, Body: hl7Input}
	web, tcp, err := h.compare(ctx, namedLoad{m.p, "7-execute-hl7", h.spec(c, overHTTP)}, namedLoad{m.p, "7-mllp", h.spec(c, overMLLP)})
	if err != nil {
		return s, err
	}
	s.Measurements = append(s.Measurements,
		&measurement{Name: fmt.Sprintf("HL7 ACK bot, $execute, c=%d", c), Load: web},
		&measurement{Name: fmt.Sprintf("HL7 ACK bot, MLLP, c=%d connections", c), Load: tcp})
	s.Checks = append(s.Checks,
		newCheck("MLLP messages/s ÷ $execute", ratio(tcp.Throughput, web.Throughput), ">=", 1.0, ""),
		newCheck("MLLP p99 ACK latency", tcp.P99Ms, "<=", 10, "ms"))
	return s, nil
}
