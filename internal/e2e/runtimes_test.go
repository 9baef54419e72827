package e2e

import (
	"fmt"
	"strings"
	"testing"
)

// counterSource counts runs at module level: under awslambda a warm instance answers 1, 2, 3…,
// under vmcontext every run starts again at 1.
func counterSource(version string) string {
	return `let n = 0;
export async function handler(medplum: unknown, event: { input: unknown }): Promise<string> {
  n++;
  return '` + version + ` ' + n;
}`
}

// runtimeBots creates and deploys bots through the FHIR API as a project admin.
type runtimeBots struct {
	s    *stack
	auth []string
	base string
}

func (b runtimeBots) create(t *testing.T, name, runtime string) string {
	t.Helper()
	body := `{"resourceType":"Bot","name":"` + name + `"}`
	if runtime != "" {
		body = `{"resourceType":"Bot","name":"` + name + `","runtimeVersion":"` + runtime + `"}`
	}
	r := do(t, "POST", b.base, "application/fhir+json", body, b.auth...)
	if r.status != 201 {
		t.Fatalf("create %s: %d %s", name, r.status, r.body)
	}
	return r.json(t)["id"].(string)
}

func (b runtimeBots) deploy(t *testing.T, id, version string) {
	t.Helper()
	r := do(t, "POST", b.base+"/"+id+"/$deploy", "application/json", mustJSON(t, map[string]string{"code": counterSource(version), "filename": "index.ts"}), b.auth...)
	if r.status != 200 {
		t.Fatalf("deploy %s: %d %s", id, r.status, r.body)
	}
}

// expect runs the bot once per answer and checks the answers in order.
func (b runtimeBots) expect(t *testing.T, id string, want ...string) {
	t.Helper()
	var got []string
	for range want {
		r := do(t, "POST", b.base+"/"+id+"/$execute", "text/plain", "x", b.auth...)
		if r.status != 200 {
			t.Fatalf("execute %s: %d %s", id, r.status, r.body)
		}
		got = append(got, string(r.body))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("bot %s answered %q, want %q", id, got, want)
	}
}

func TestRuntimesAWSLambdaAndVMContext(t *testing.T) {
	s := startStack(t, "")
	b := runtimeBots{s: s, auth: []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}, base: s.gateway + "/fhir/R4/Bot"}

	lambda := b.create(t, "lambda", "") // the default: awslambda
	b.deploy(t, lambda, "v1")
	vm := b.create(t, "vm", "vmcontext")
	b.deploy(t, vm, "v1")
	explicit := b.create(t, "explicit", "awslambda")
	b.deploy(t, explicit, "v1")

	b.expect(t, lambda, "v1 1", "v1 2", "v1 3")
	b.expect(t, vm, "v1 1", "v1 1", "v1 1")
	// Same code, another bot: its own instance.
	b.expect(t, explicit, "v1 1", "v1 2")

	// A redeploy is seen by the very next run, and its module state starts again.
	b.deploy(t, lambda, "v2")
	b.expect(t, lambda, "v2 1", "v2 2")

	// Switching the runtime by update keeps the code and takes effect at once.
	r := do(t, "PUT", b.base+"/"+lambda, "application/fhir+json", `{"resourceType":"Bot","id":"`+lambda+`","name":"lambda","runtimeVersion":"vmcontext"}`, b.auth...)
	if r.status != 200 || r.json(t)["runtimeVersion"] != "vmcontext" {
		t.Fatalf("update to vmcontext: %d %s", r.status, r.body)
	}
	b.expect(t, lambda, "v2 1", "v2 1")

	// Any other runtime is refused at create and update, naming the allowed ones.
	r = do(t, "POST", b.base, "application/fhir+json", `{"resourceType":"Bot","name":"bad","runtimeVersion":"fhirgate"}`, b.auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "awslambda, vmcontext") {
		t.Fatalf("create with runtimeVersion fhirgate: %d %s", r.status, r.body)
	}
	r = do(t, "PUT", b.base+"/"+vm, "application/fhir+json", `{"resourceType":"Bot","id":"`+vm+`","name":"vm","runtimeVersion":"nodejs"}`, b.auth...)
	if r.status != 400 || !strings.Contains(string(r.body), "awslambda, vmcontext") {
		t.Fatalf("update with runtimeVersion nodejs: %d %s", r.status, r.body)
	}
	b.expect(t, vm, "v1 1")

	// The admin API goes through the same check.
	r = do(t, "POST", "http://"+s.adminAddr+"/fhirgate/Bot", "application/json", mustJSON(t, map[string]any{
		"resourceType": "Bot", "name": "admin-bad", "meta": map[string]any{"project": "alpha"}, "runtimeVersion": "lambda",
	}))
	if r.status != 400 || !strings.Contains(string(r.body), "awslambda, vmcontext") {
		t.Fatalf("admin API create with runtimeVersion lambda: %d %s", r.status, r.body)
	}

	// The same code in another project is another instance: its count starts at 1 while
	// alpha's goes on.
	other := s.deployBot(t, "beta", "counter", counterSource("v1"))
	bob := runtimeBots{s: s, auth: []string{"Authorization", "Bearer " + s.token(t, "beta-app", "bob-token")}, base: b.base}
	b.expect(t, explicit, "v1 3")
	bob.expect(t, other, "v1 1", "v1 2")
	b.expect(t, explicit, "v1 4")
}

// TestRuntimesDefaultOption: bot_default_runtime vmcontext makes bots without a runtimeVersion
// fresh per run, and in-process isolation keeps awslambda instances as workers do.
func TestRuntimesDefaultOption(t *testing.T) {
	s := startStack(t, "bot_default_runtime vmcontext\n\t\tbot_isolation inprocess")
	b := runtimeBots{s: s, auth: []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}, base: s.gateway + "/fhir/R4/Bot"}
	plain := b.create(t, "plain", "")
	b.deploy(t, plain, "v1")
	lambda := b.create(t, "lambda", "awslambda")
	b.deploy(t, lambda, "v1")
	b.expect(t, plain, "v1 1", "v1 1", "v1 1")
	b.expect(t, lambda, "v1 1", "v1 2", "v1 3")
	b.deploy(t, lambda, "v2")
	b.expect(t, lambda, "v2 1", "v2 2")
}
