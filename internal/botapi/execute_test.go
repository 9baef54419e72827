package botapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/deploy"
	"github.com/fhirgate/fhirgate/internal/gateway"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/badgerkv"
)

// recordingRunner runs bots with a real Runner and keeps the Requests it saw.
type recordingRunner struct {
	r    *botrunner.Runner
	mu   sync.Mutex
	seen []botrunner.Request
}

func (rr *recordingRunner) Run(ctx context.Context, req botrunner.Request) (*botrunner.Result, error) {
	rr.mu.Lock()
	rr.seen = append(rr.seen, req)
	rr.mu.Unlock()
	return rr.r.Run(ctx, req)
}

// deployBot stores a bot of project with code and returns its id.
func deployBot(t *testing.T, st *store.Store, compiler deploy.Compiler, project, name, code string) string {
	t.Helper()
	ctx := context.Background()
	bot := &store.Bot{Name: name}
	bot.Meta.Project = project
	if err := st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Deploy(ctx, st, compiler, bot.ID, "index.ts", code); err != nil {
		t.Fatal(err)
	}
	return bot.ID
}

// TestBotToBotCallRunsOnItsCallersSlot: with one slot per project, a bot calling another bot
// completes (the call borrows its caller's slot instead of waiting behind it until the queue
// timeout), and every run carries its caller's project and user.
func TestBotToBotCallRunsOnItsCallersSlot(t *testing.T) {
	db, err := badgerkv.Open(badgerkv.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st := store.New(db, store.Options{})
	project := &store.Project{Name: "p"}
	if err := st.Create(context.Background(), project, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	compiler := newCompiler(t)
	callee := deployBot(t, st, compiler, project.ID, "callee", `export async function handler(medplum: any, event: any) { return { twice: event.input.n * 2 }; }`)
	caller := deployBot(t, st, compiler, project.ID, "caller", `export async function handler(medplum: any) {
  const r = await medplum.executeBot('`+callee+`', { n: 21 }, 'application/json');
  return { got: r.twice };
}`)
	runner := &recordingRunner{r: botrunner.New(botrunner.Options{MaxConcurrent: 2, ProjectMaxConcurrent: 1, QueueTimeout: 200 * time.Millisecond})}
	api, err := New(Options{Store: st, Runner: runner, Compiler: compiler})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()

	id := &oauth.Identity{ProjectID: project.ID, UserID: "user-1", Profile: "Practitioner/1"}
	r := httptest.NewRequest(http.MethodPost, "/fhir/R4/Bot/"+caller+"/$execute", strings.NewReader(`{}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	api.Handler(targetOf(r))(w, r, id, &gateway.Backend{})
	if w.Code != http.StatusOK || w.Body.String() != `{"got":42}` {
		t.Fatalf("$execute of the calling bot: %d %s", w.Code, w.Body)
	}
	runner.mu.Lock()
	defer runner.mu.Unlock()
	if len(runner.seen) != 2 {
		t.Fatalf("%d runs, want 2", len(runner.seen))
	}
	for i, req := range runner.seen {
		// The calling bot runs as itself: the bot it calls is asked for by
		// Bot/{caller}, which has no user.
		wantUser := "user-1"
		if i == 1 {
			wantUser = ""
		}
		if req.Project != project.ID || req.User != wantUser {
			t.Errorf("run %d (%s): project %q, user %q", i, req.BotID, req.Project, req.User)
		}
		if want := i == 1; req.InheritSlot != want {
			t.Errorf("run %d (%s): InheritSlot %v, want %v", i, req.BotID, req.InheritSlot, want)
		}
	}
}
