package botapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/botrunner/workertest"
	"github.com/fhirgate/fhirgate/internal/oauth"
	"github.com/fhirgate/fhirgate/internal/store"
	"github.com/fhirgate/fhirgate/internal/store/pgkv/pgkvtest"
)

// TestMain doubles as the compile process the tests' Compiler starts, and
// drops the PostgreSQL database of the replica tests after the run.
func TestMain(m *testing.M) {
	if botrunner.IsWorkerProcess() {
		workertest.Main(m) // serves the worker and exits
	}
	os.Exit(pgkvtest.Main(m))
}

// newCompiler returns a Compiler whose processes are this test binary.
func newCompiler(t testing.TB) *botrunner.Compiler { return workertest.Compiler(t) }

// busyCompiler is a Compiler whose slots are all taken.
type busyCompiler struct{}

func (busyCompiler) Compile(context.Context, string, string, string) (*botrunner.Program, error) {
	return nil, botrunner.ErrCompileBusy
}

func TestDeployWhileCompilesAreBusyAnswers429WithRetryAfter(t *testing.T) {
	f := newBotFixture(t)
	f.api.o.Compiler = busyCompiler{}
	ctx := context.Background()
	project := &store.Project{Name: "p"}
	if err := f.st.Create(ctx, project, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	bot := &store.Bot{Name: "b"}
	bot.Meta.Project = project.ID
	if err := f.st.Create(ctx, bot, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	target := "/fhir/R4/Bot/" + bot.ID + "/$deploy"
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(`{"code":"exports.handler = () => 1","filename":"index.js"}`))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.api.Handler(targetOf(r))(w, r, &oauth.Identity{ProjectID: project.ID, Admin: true}, nil)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "too many bot compiles") {
		t.Fatalf("%d Retry-After %q: %s", w.Code, w.Header().Get("Retry-After"), w.Body.String())
	}
}
