package botrunner

import (
	_ "embed"
	"strings"
	"sync/atomic"

	"github.com/dop251/goja"
)

// The real @medplum/core, bundled by esbuild (go generate; see internal/gencorepkg), provides the
// exports the sandbox does not write itself: FHIRPath, the schema, search and formatting helpers
// and the rest of the package's ~540 names. Writing those again would be a second, drifting
// FHIRPath; loading Medplum's own code gives Medplum's answers. It is loaded into a run's runtime
// the first time the run reads such an export (a bot that imports only what core.js provides
// never pays for it): compiled once per process, evaluated once per runtime — once per warm
// instance under awslambda, once per run under vmcontext (docs/bots.md gives the cost).
//
//go:generate go run ./internal/gencorepkg ../internal/e2e/medplum/node_modules/@medplum/core

//go:embed corepkg.js
var corePkgSource string

//go:embed corepkg_names.txt
var corePkgNameList string

var corePkgProgram = embeddedProgram("@medplum/core (package)", corePkgSource)

// corePkgVersion is the bundled package's version, from the first line of corepkg_names.txt.
var corePkgVersion, corePkgNames = func() (string, map[string]bool) {
	lines := strings.Split(strings.TrimSpace(corePkgNameList), "\n")
	names := make(map[string]bool, len(lines))
	for _, n := range lines[1:] {
		names[n] = true
	}
	return strings.TrimPrefix(lines[0], "# @medplum/core "), names
}()

// coreUnavailable are the package's exports the sandbox refuses, with the reason: reading one
// throws a TypeError saying it, and a bot importing one is refused at deploy. docs/bots.md lists
// them (TestCoreUnavailableDocumented).
var coreUnavailable = map[string]string{
	"FhircastConnection":    "it needs a WebSocket, a network connection of the bot's own",
	"ReconnectingWebSocket": "it needs a WebSocket, a network connection of the bot's own",
	"SubscriptionManager":   "it needs a WebSocket, a network connection of the bot's own",
	"MedplumKeyValueClient": "it needs Medplum's server (its keyvalue API), which the FHIR backend does not have",
	"getWebSocketUrl":       "it builds the URL of Medplum's server's WebSocket endpoint, which the FHIR backend does not have",
}

// corePkgLoads counts the bundle's evaluations, for tests.
var corePkgLoads atomic.Int64

// pkg evaluates the bundle in this run's runtime (once) and returns its exports.
func (c *lazyCore) pkg() *goja.Object {
	if c.real == nil {
		x := c.x
		module := x.rt.NewObject()
		exports := x.rt.NewObject()
		_ = module.Set("exports", exports)
		fnv, err := x.rt.RunProgram(corePkgProgram())
		if err != nil {
			panic(err)
		}
		fn, _ := goja.AssertFunction(fnv)
		corePkgLoads.Add(1)
		if _, err := fn(goja.Undefined(), exports, module); err != nil {
			panic(err)
		}
		c.real = module.Get("exports").ToObject(x.rt)
	}
	return c.real
}

// coreProvides says whether the sandbox's '@medplum/core' has an export name, from core.js or the
// package.
func coreProvides(name string) bool {
	if _, ok := coreExports[name]; ok {
		return true
	}
	_, refused := coreUnavailable[name]
	return corePkgNames[name] && !refused
}

// coreMissing is the TypeError for reading an export the sandbox does not have.
func coreMissing(name string) string {
	if reason, ok := coreUnavailable[name]; ok {
		return "'" + name + "' of '@medplum/core' is not available in the bot sandbox: " + reason
	}
	return "'@medplum/core' has no export named '" + truncate(name, 100) + "'"
}
