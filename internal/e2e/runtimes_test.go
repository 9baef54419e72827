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

// TestRuntimesHostileBots runs the reliability suite's hostile bots in both runtimes, twice each:
// the second run of a bot whose instance was stopped (memory, deadline, stack) gets a fresh one
// and ends the same way, never stuck; a module whose top level throws answers its 400 every
// time; the gateway goes on serving.
func TestRuntimesHostileBots(t *testing.T) {
	for _, runtime := range []string{"awslambda", "vmcontext"} {
		t.Run(runtime, func(t *testing.T) {
			s := startStack(t, "bot_timeout 2s\n\t\tbot_worker_memory 128MiB\n\t\tbot_default_runtime "+runtime)
			auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
			echo := s.gateway + "/fhir/R4/Bot/" + s.botID(t, "alpha", "https://example.com/bots|echo") + "/$execute"
			bots := append(hostileBots[:len(hostileBots):len(hostileBots)], struct {
				name    string
				code    string
				want    []string
				timeout int
			}{"top level throws", `let n = 0; n++; throw new Error('top level broke ' + n); exports.handler = () => 1;`,
				[]string{"top level broke 1"}, 0})
			for _, b := range bots {
				id := deployBot(t, s, auth, b.name, b.code, b.timeout)
				t.Run(b.name, func(t *testing.T) {
					for run := 1; run <= 2; run++ {
						r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{}`, auth...)
						matched := false
						for _, w := range b.want {
							matched = matched || strings.Contains(string(r.body), w)
						}
						if r.status != 400 || !matched {
							t.Fatalf("run %d: %d %s, want 400 with one of %q", run, r.status, r.body, b.want)
						}
					}
					if r := do(t, "POST", echo, "text/plain", "still here", auth...); r.status != 200 || string(r.body) != "still here" {
						t.Fatalf("echo: %d %s", r.status, r.body)
					}
				})
			}
		})
	}
}
