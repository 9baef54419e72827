package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPerBotConcurrencyLimit caps one bot at one run at a time: a second
// run waits for the slot (bot_queue_timeout), then is refused with 429 and
// Retry-After, while other bots keep running.
func TestPerBotConcurrencyLimit(t *testing.T) {
	s := startStack(t, "bot_timeout 3s\n\t\tbot_queue_timeout 300ms")
	auth := []string{"Authorization", "Bearer " + s.token(t, "alpha-app", "alice-token")}
	id := s.botID(t, "alpha", "https://example.com/bots|misbehave")
	admin := "http://" + s.adminAddr + "/fhirgate/Bot/" + id

	bot := do(t, "GET", admin, "", "").json(t)
	bot["maxConcurrent"] = 1
	body, _ := json.Marshal(bot)
	if r := do(t, "PUT", admin, "application/json", string(body)); r.status != 200 {
		t.Fatalf("setting maxConcurrent: %d %s", r.status, r.body)
	}

	loop := make(chan response, 1)
	go func() {
		loop <- do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{"what":"loop"}`, auth...)
	}()
	time.Sleep(300 * time.Millisecond) // let the loop take the bot's only slot
	r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+id+"/$execute", "application/json", `{}`, auth...)
	if r.status != 429 || r.header.Get("Retry-After") == "" || !strings.Contains(string(r.body), "OperationOutcome") {
		t.Fatalf("second run of a bot capped at one: %d %v %s", r.status, r.header, r.body)
	}
	echo := s.botID(t, "alpha", "https://example.com/bots|echo")
	if r := do(t, "POST", s.gateway+"/fhir/R4/Bot/"+echo+"/$execute", "text/plain", "other bot", auth...); r.status != 200 {
		t.Fatalf("another bot during the cap: %d %s", r.status, r.body)
	}
	if r := <-loop; r.status != 400 || !strings.Contains(string(r.body), "timed out") {
		t.Fatalf("looping run: %d %s", r.status, r.body)
	}
}
