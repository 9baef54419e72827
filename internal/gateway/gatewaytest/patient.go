package gatewaytest

import (
	"strconv"
	"strings"
)

// Patient is a FHIR Patient of about 1.1 KB under id, version 1, shaped
// like the one the performance harness writes (cmd/fhirgate-bench): the
// realistic resource that benchmarks of the services behind the gate
// carry (a Subscription's trigger, a bot's input).
func Patient(id string) []byte {
	var b strings.Builder
	b.WriteString(`{"resourceType":"Patient","id":"` + id + `","meta":{"versionId":"1","lastUpdated":"2026-01-15T09:30:00.000Z"},"identifier":[`)
	for i := range 5 {
		if i > 0 {
			b.WriteByte(',')
		}
		n := strconv.Itoa(i)
		b.WriteString(`{"use":"usual","system":"urn:oid:1.2.36.146.595.217.0.` + n + `","value":"1234` + n + `","period":{"start":"2001-05-06"}}`)
	}
	b.WriteString(`],"active":true,"name":[{"use":"official","family":"Chalmers","given":["Peter","James"]}],` +
		`"telecom":[{"system":"phone","value":"(03) 5555 6473","use":"work","rank":1}],"gender":"male","birthDate":"1974-12-25",` +
		`"address":[{"use":"home","line":["534 Erewhon St"],"city":"PleasantVille","state":"Vic","postalCode":"3999"}],` +
		`"contact":[{"name":{"family":"du Marché","given":["Bénédicte"]},"gender":"female"}],"managingOrganization":{"reference":"Organization/1"}}`)
	return []byte(b.String())
}
