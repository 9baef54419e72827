package caddymodule

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/fhirgate/fhirgate/internal/store"
)

// TestApplyBotAuditEventTrigger applies a declared bot's audit_event_trigger
// to the stored Bot, and refuses an unknown one naming the config key.
func TestApplyBotAuditEventTrigger(t *testing.T) {
	tests := []struct {
		trigger, want, wantErr string
	}{
		{trigger: "", want: ""},
		{trigger: "never", want: "never"},
		{trigger: "on-error", want: "on-error"},
		{trigger: "sometimes", wantErr: "bot b: invalid audit_event_trigger 'sometimes': want one of always, never, on-error, on-output"},
	}
	for _, tt := range tests {
		t.Run(tt.trigger, func(t *testing.T) {
			ctx := context.Background()
			kv, err := store.OpenBadger(store.BadgerOptions{Dir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Close()
			st := store.New(kv, store.Options{})
			a := &App{logger: zap.NewNop()}
			err = a.applyProject(ctx, st, "p", &ProjectConfig{Bots: map[string]*BotConfig{"b": {AuditEventTrigger: tt.trigger}}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var bot store.Bot
			if err := st.Read(ctx, "Bot", declaredID("bot", "p", "b"), &bot); err != nil {
				t.Fatal(err)
			}
			if bot.AuditEventTrigger != tt.want {
				t.Fatalf("stored auditEventTrigger %q, want %q", bot.AuditEventTrigger, tt.want)
			}
		})
	}
}
