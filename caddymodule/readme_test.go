package caddymodule

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeDocumentsEveryConfigField keeps the configuration reference,
// docs/configuration.md, in step with the config structs: every JSON field
// must be named there.
func TestReadmeDocumentsEveryConfigField(t *testing.T) {
	raw, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(raw)
	word := func(name string) *regexp.Regexp {
		return regexp.MustCompile("(^|[\\s.`(])" + regexp.QuoteMeta(name) + "([\\s.`,)]|$)")
	}
	for _, v := range []any{App{}, ProjectConfig{}, ClientConfig{}, UserConfig{}, BotConfig{}, EgressConfig{}, Handler{}, IdentityHeaders{}, BadgerStorage{}, PostgresStorage{}, MLLP{}, MLLPRoute{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "" || name == "-" {
				continue
			}
			if !word(name).MatchString(section) {
				t.Errorf("docs/configuration.md does not document %s.%s (%q)", typ.Name(), typ.Field(i).Name, name)
			}
		}
	}
}
