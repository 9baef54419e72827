package caddymodule

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestReplicasDocCaddyfilesAdapt adapts every Caddyfile of
// docs/replicas.md, so the two-replica setup it gives stays valid: the
// replica's names the postgres storage, the load balancer's both replicas.
func TestReplicasDocCaddyfilesAdapt(t *testing.T) {
	raw, err := os.ReadFile("../docs/replicas.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```caddyfile\n(.*?)```").FindAllStringSubmatch(string(raw), -1)
	if len(blocks) != 2 {
		t.Fatalf("found %d Caddyfiles in docs/replicas.md, want the replica's and the load balancer's", len(blocks))
	}
	t.Setenv("REPLICA_ADMIN", "2019")
	t.Setenv("REPLICA_PORT", "8081")
	adapter := caddyconfig.GetAdapter("caddyfile")
	var adapted []string
	for _, b := range blocks {
		out, warnings, err := adapter.Adapt([]byte(b[1]), map[string]any{"filename": "Caddyfile"})
		if err != nil {
			t.Fatalf("adapting\n%s\n: %v", b[1], err)
		}
		for _, w := range warnings {
			t.Errorf("adapting: warning %s", w.Message)
		}
		if !json.Valid(out) {
			t.Fatalf("adapted config is not JSON: %s", out)
		}
		adapted = append(adapted, string(out))
	}
	if !strings.Contains(adapted[0], `"storage":{"dsn":"{env.FHIRGATE_POSTGRES_DSN}"`) {
		t.Errorf("the replica's config does not use the postgres storage: %s", adapted[0])
	}
	if !strings.Contains(adapted[1], `"dial":"127.0.0.1:8081"`) || !strings.Contains(adapted[1], `"dial":"127.0.0.1:8082"`) {
		t.Errorf("the load balancer does not name both replicas: %s", adapted[1])
	}
}
