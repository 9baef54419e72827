package main

import (
	"fmt"
	"strconv"
	"strings"
)

// sites are the listeners of one Caddy instance.
type sites struct {
	admin   string // Caddy's admin API (pprof, fhirgate admin API)
	plain   string // reverse_proxy alone
	gateway string // fhirgate + reverse_proxy; also the token endpoint
	respond string // fhirgate + a fixed respond body
	mllp    string // fhirgate_mllp into the HL7 ACK bot (caddy-l4)
}

func newSites() (sites, error) {
	var s sites
	for _, p := range []*string{&s.admin, &s.plain, &s.gateway, &s.respond, &s.mllp} {
		port, err := freePort()
		if err != nil {
			return sites{}, err
		}
		*p = "127.0.0.1:" + strconv.Itoa(port)
	}
	return s, nil
}

// caddyConfig is what a bench Caddyfile holds.
type caddyConfig struct {
	sites         sites
	storageDir    string
	postgresDSN   string // when set, the store is on PostgreSQL (storage postgres) instead of storageDir
	backend       string // host:port of the FHIR stand-in
	idp           string // host:port of the identity-provider stand-in
	declaredUsers int    // users user0..user<n-1> declared in the Caddyfile
	echoBotSource string // path of the echo bot, declared when set (also as unauditedEcho and vmcontextEcho)
	hl7BotSource  string // path of the HL7 ACK bot, declared with the MLLP listener when set
	respondBody   string // body of the respond site
	botIsolation  string // fhirgate's bot_isolation; "" keeps the default
	botMax        int    // fhirgate's bot_max_concurrent; 0 keeps the default
	botRuns       int    // fhirgate's bot_runs_per_worker; 0 keeps the default
	// subscriberBotSource, when set, turns subscriptions on at the gateway
	// site, declares the subscriber bot with this source, and makes user0
	// a project admin (who may manage Subscriptions).
	subscriberBotSource string
}

// caddyfile renders the config. Access logs stay off (Caddy's default) so
// logging does not dominate what is measured.
func (c caddyConfig) caddyfile() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("{")
	w("\tadmin %s", c.sites.admin)
	w("\tauto_https off")
	w("\tpersist_config off")
	w("\tfhirgate {")
	if c.postgresDSN != "" {
		w("\t\tstorage postgres {")
		w("\t\t\tdsn %s", c.postgresDSN)
		w("\t\t}")
	} else {
		w("\t\tstorage_dir %s", c.storageDir)
	}
	w("\t\tissuer http://%s", c.sites.gateway)
	if c.botIsolation != "" {
		w("\t\tbot_isolation %s", c.botIsolation)
	}
	if c.botMax > 0 {
		w("\t\tbot_max_concurrent %d", c.botMax)
	}
	if c.botRuns > 0 {
		w("\t\tbot_runs_per_worker %d", c.botRuns)
	}
	w("\t\tproject %s {", benchProject)
	w("\t\t\tname %s", benchProject)
	w("\t\t\tclient %s {", benchClient)
	w("\t\t\t\tuserinfo_url http://%s/userinfo", c.idp)
	w("\t\t\t}")
	w("\t\t\tclient %s {", benchMachine)
	w("\t\t\t\tsecret %s", benchMachineSecret)
	w("\t\t\t}")
	w("\t\t\tclient %s {", jwtClient)
	w("\t\t\t\tuserinfo_url http://%s/userinfo", c.idp)
	w("\t\t\t\tidp_jwks_uri http://%s/jwks.json", c.idp)
	w("\t\t\t\tidp_issuer %s", jwtIssuer)
	w("\t\t\t\tidp_audience %s", jwtAudience)
	w("\t\t\t}")
	for i := range c.declaredUsers {
		w("\t\t\tuser %s {", userEmail(i))
		w("\t\t\t\tprofile Practitioner/p%d", i)
		if i == 0 && c.subscriberBotSource != "" {
			w("\t\t\t\tadmin")
		}
		w("\t\t\t}")
	}
	if c.echoBotSource != "" {
		w("\t\t\tbot echo {")
		w("\t\t\t\tidentifier %s|echo", botSystem)
		w("\t\t\t\tsource %s", c.echoBotSource)
		w("\t\t\t}")
		// The same code without its AuditEvent, to show what the audit costs.
		w("\t\t\tbot %s {", unauditedEcho)
		w("\t\t\t\tidentifier %s|%s", botSystem, unauditedEcho)
		w("\t\t\t\tsource %s", c.echoBotSource)
		w("\t\t\t\taudit_event_trigger never")
		w("\t\t\t}")
		// The same code in Medplum's other runtime: a fresh JavaScript runtime per run.
		w("\t\t\tbot %s {", vmcontextEcho)
		w("\t\t\t\tidentifier %s|%s", botSystem, vmcontextEcho)
		w("\t\t\t\tsource %s", c.echoBotSource)
		w("\t\t\t\truntime_version vmcontext")
		w("\t\t\t}")
	}
	if c.subscriberBotSource != "" {
		w("\t\t\tbot %s {", subscriberBot)
		w("\t\t\t\tidentifier %s|%s", botSystem, subscriberBot)
		w("\t\t\t\tsource %s", c.subscriberBotSource)
		w("\t\t\t}")
	}
	if c.hl7BotSource != "" {
		w("\t\t\tbot %s {", hl7AckBot)
		w("\t\t\t\tidentifier %s|%s", botSystem, hl7AckBot)
		w("\t\t\t\tsource %s", c.hl7BotSource)
		w("\t\t\t}")
	}
	w("\t\t}")
	w("\t}")
	if c.hl7BotSource != "" {
		w("\tlayer4 {")
		w("\t\t%s {", c.sites.mllp)
		w("\t\t\troute {")
		w("\t\t\t\tfhirgate_mllp {")
		w("\t\t\t\t\tproject %s", benchProject)
		w("\t\t\t\t\tbot %s|%s", botSystem, hl7AckBot)
		w("\t\t\t\t\tmax_concurrent 1024")
		w("\t\t\t\t}")
		w("\t\t\t}")
		w("\t\t}")
		w("\t}")
	}
	w("}")
	w("")
	w("http://%s {", c.sites.plain)
	w("\treverse_proxy %s", c.backend)
	w("}")
	w("")
	w("http://%s {", c.sites.gateway)
	w("\tfhirgate {")
	w("\t\tfhir_base /fhir/R4")
	if c.subscriberBotSource != "" {
		w("\t\tsubscriptions on")
	}
	w("\t}")
	w("\treverse_proxy %s", c.backend)
	w("}")
	w("")
	w("http://%s {", c.sites.respond)
	w("\tfhirgate {")
	w("\t\tfhir_base /fhir/R4")
	w("\t}")
	w("\theader Content-Type application/json")
	w("\trespond `%s` 200", c.respondBody)
	w("}")
	return b.String()
}
