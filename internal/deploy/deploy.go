// Package deploy compiles a bot's source and stores it: the source and the
// compiled CommonJS each become an immutable Binary record, and the Bot's
// sourceCode and executableCode point at them (Medplum's shape:
// `{"contentType": "text/javascript", "url": "Binary/<id>", "title": "index.js"}`).
//
// Because a Binary is never rewritten, the executableCode URL names one exact
// compiled program, which is what the bot runner caches programs by.
package deploy

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/fhirgate/fhirgate/botrunner"
	"github.com/fhirgate/fhirgate/internal/fhir"
	"github.com/fhirgate/fhirgate/internal/store"
)

// Error is a deployment failure caused by the request: the bot does not
// exist, its code does not compile, or its project has too many compiles
// running. It is the fhir.Error to answer.
type Error = fhir.Error

// Compiler compiles a bot's source for the bot's project. The one to use is
// *botrunner.Compiler, which compiles in a child process: source crafted to
// crash or stall the compiler must not reach the gateway's own stack.
type Compiler interface {
	Compile(ctx context.Context, project, filename, source string) (*botrunner.Program, error)
}

// Deploy compiles code (TypeScript, ES module or CommonJS, told apart by
// filename) for the bot botID with c and stores it. It returns the updated
// bot. Deploying the same source again is a no-op that returns the bot
// unchanged.
func Deploy(ctx context.Context, st *store.Store, c Compiler, botID, filename, code string) (*store.Bot, error) {
	bot, err := store.Get[store.Bot](ctx, st, botID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &Error{Status: http.StatusNotFound, Message: fmt.Sprintf("Bot/%s not found", botID)}
	}
	if err != nil {
		return nil, fmt.Errorf("loading bot %s: %w", botID, err)
	}
	if bot.RuntimeVersion != "" && !slices.Contains(store.KnownBotRuntimes, bot.RuntimeVersion) {
		// Stored before the value was checked; the bot could not be written back.
		return nil, &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf("Bot/%s has runtimeVersion '%s', which is not one of %s: update the bot first",
			botID, bot.RuntimeVersion, strings.Join(store.KnownBotRuntimes, ", "))}
	}
	filename = path.Base(filename)
	if same, err := sameSource(ctx, st, bot, filename, code); err != nil || same {
		return bot, err
	}

	project := bot.Meta.Project
	js, err := Compile(ctx, c, project, filename, code)
	if err != nil {
		return nil, err
	}

	src, err := putBinary(ctx, st, project, sourceContentType(filename), code)
	if err != nil {
		return nil, fmt.Errorf("storing source of bot %s: %w", botID, err)
	}
	exe, err := putBinary(ctx, st, project, "text/javascript", js)
	if err != nil {
		return nil, fmt.Errorf("storing compiled code of bot %s: %w", botID, err)
	}
	old := []*store.Attachment{bot.SourceCode, bot.ExecutableCode}
	bot.SourceCode = &store.Attachment{ContentType: src.ContentType, URL: "Binary/" + src.ID, Title: filename}
	bot.ExecutableCode = &store.Attachment{ContentType: exe.ContentType, URL: "Binary/" + exe.ID, Title: jsName(filename)}
	if _, err := st.Put(ctx, bot, store.PutOptions{IfMatch: bot.Meta.VersionID}); err != nil {
		return nil, fmt.Errorf("updating bot %s: %w", botID, err)
	}
	// The bot no longer refers to its previous code. Removing it is
	// housekeeping: a failure leaves an orphan Binary, not a broken bot.
	for _, a := range old {
		if id, ok := binaryID(a); ok {
			_ = st.Delete(ctx, "Binary", id)
		}
	}
	return bot, nil
}

// Compile compiles a bot's code (TypeScript, ES module or CommonJS, told
// apart by filename) with c for the bot's project, to the CommonJS the
// runner executes. Every compile of bot code goes through it: $deploy, the
// admin API and the bots a config declares. Code that does not compile is
// an *Error with status 400 naming the line and column; a project with too
// many compiles running, 429.
func Compile(ctx context.Context, c Compiler, project, filename, code string) (string, error) {
	prog, err := c.Compile(ctx, project, path.Base(filename), code)
	if err != nil {
		var cerr *botrunner.CompileError
		switch {
		case errors.As(err, &cerr):
			return "", &Error{Status: http.StatusBadRequest, Message: "compiling bot: " + cerr.Error()}
		case errors.Is(err, botrunner.ErrCompileBusy):
			return "", &Error{Status: http.StatusTooManyRequests, Message: "too many bot compiles in progress for this project; retry shortly", RetryAfter: time.Second}
		}
		return "", fmt.Errorf("compiling bot: %w", err)
	}
	return prog.JS, nil
}

// Code is a bot's compiled code as the store keeps it: two new Binary
// records (the source and the compiled CommonJS, each with a fresh id) and
// the attachments a Bot points at them with.
type Code struct {
	Source, Executable         *store.Binary
	SourceCode, ExecutableCode *store.Attachment
}

// NewCode builds the records of code compiled by [Compile] for a bot of
// project, without storing them.
func NewCode(project, filename, code, js string) *Code {
	filename = path.Base(filename)
	src := newBinary(project, sourceContentType(filename), code)
	exe := newBinary(project, "text/javascript", js)
	return &Code{
		Source: src, Executable: exe,
		SourceCode:     &store.Attachment{ContentType: src.ContentType, URL: "Binary/" + src.ID, Title: filename},
		ExecutableCode: &store.Attachment{ContentType: exe.ContentType, URL: "Binary/" + exe.ID, Title: jsName(filename)},
	}
}

func newBinary(project, contentType, data string) *store.Binary {
	bin := &store.Binary{ContentType: contentType, Data: base64.StdEncoding.EncodeToString([]byte(data))}
	bin.ID = uuid.Must(uuid.NewV7()).String()
	bin.Meta.Project = project
	return bin
}

// SameSource reports whether bot already runs code compiled from this
// source and filename, so deploying it again would change nothing.
func SameSource(ctx context.Context, st *store.Store, bot *store.Bot, filename, code string) (bool, error) {
	return sameSource(ctx, st, bot, path.Base(filename), code)
}

// CodeBinaries returns the ids of the Binary records bot's code points at.
func CodeBinaries(bot *store.Bot) []string {
	var ids []string
	for _, a := range []*store.Attachment{bot.SourceCode, bot.ExecutableCode} {
		if id, ok := binaryID(a); ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Source returns the bot's stored source code and its filename.
func Source(ctx context.Context, st *store.Store, bot *store.Bot) (code, filename string, err error) {
	return readAttachment(ctx, st, bot.SourceCode)
}

// Executable returns the bot's compiled CommonJS and a key naming that exact
// program (its Binary id), for caching.
func Executable(ctx context.Context, st *store.Store, bot *store.Bot) (code, key string, err error) {
	code, _, err = readAttachment(ctx, st, bot.ExecutableCode)
	if err != nil {
		return "", "", err
	}
	id, _ := binaryID(bot.ExecutableCode)
	return code, id, nil
}

// ErrNoCode is returned for a bot that was never deployed.
var ErrNoCode = errors.New("bot has no deployed code")

func readAttachment(ctx context.Context, st *store.Store, a *store.Attachment) (string, string, error) {
	id, ok := binaryID(a)
	if !ok {
		return "", "", ErrNoCode
	}
	bin, err := store.Get[store.Binary](ctx, st, id)
	if err != nil {
		return "", "", fmt.Errorf("loading %s: %w", a.URL, err)
	}
	data, err := base64.StdEncoding.DecodeString(bin.Data)
	if err != nil {
		return "", "", fmt.Errorf("decoding %s: %w", a.URL, err)
	}
	return string(data), a.Title, nil
}

func sameSource(ctx context.Context, st *store.Store, bot *store.Bot, filename, code string) (bool, error) {
	if bot.SourceCode == nil || bot.ExecutableCode == nil || bot.SourceCode.Title != filename {
		return false, nil
	}
	stored, _, err := readAttachment(ctx, st, bot.SourceCode)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, ErrNoCode) {
		return false, nil
	}
	return err == nil && stored == code, err
}

func putBinary(ctx context.Context, st *store.Store, project, contentType, data string) (*store.Binary, error) {
	bin := &store.Binary{ContentType: contentType, Data: base64.StdEncoding.EncodeToString([]byte(data))}
	bin.Meta.Project = project
	if err := st.Create(ctx, bin, store.PutOptions{}); err != nil {
		return nil, err
	}
	return bin, nil
}

func binaryID(a *store.Attachment) (string, bool) {
	if a == nil {
		return "", false
	}
	id, ok := strings.CutPrefix(a.URL, "Binary/")
	return id, ok && id != ""
}

func sourceContentType(filename string) string {
	switch path.Ext(filename) {
	case ".ts", ".mts", ".cts":
		return "application/typescript"
	default:
		return "text/javascript"
	}
}

// jsName is the compiled file's name: index.ts becomes index.js.
func jsName(filename string) string {
	return strings.TrimSuffix(filename, path.Ext(filename)) + ".js"
}
