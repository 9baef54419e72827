package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// medplumBot has every element of Medplum's Bot (@medplum/fhirtypes
// Bot.d.ts) but runAsUser, with fhirgate's settings as extensions and a
// foreign extension beside them.
const medplumBot = `{
  "resourceType": "Bot",
  "implicitRules": "https://example.org/rules",
  "language": "en",
  "text": {"status": "generated", "div": "<div xmlns=\"http://www.w3.org/1999/xhtml\">Nightly</div>"},
  "contained": [{"resourceType": "Basic", "id": "c1", "code": {"text": "x"}}],
  "extension": [
    {"url": "https://example.org/owner", "valueReference": {"reference": "Practitioner/1"}},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-secret", "extension": [{"url": "name", "valueString": "API_KEY"}, {"url": "value", "valueString": "s3cret"}]},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-secret", "extension": [{"url": "name", "valueString": "RETRIES"}, {"url": "value", "valueInteger": 3}]},
    {"url": "https://fhirgate.dev/fhir/StructureDefinition/bot-max-concurrent", "valueInteger": 4}
  ],
  "modifierExtension": [{"url": "https://example.org/mod", "valueBoolean": true}],
  "identifier": [{"system": "https://example.org/bots", "value": "nightly"}],
  "name": "Nightly",
  "description": "Runs at night",
  "runtimeVersion": "vmcontext",
  "timeout": 30,
  "photo": {"contentType": "image/png", "url": "https://example.org/bot.png", "title": "logo", "size": 12, "hash": "aGFzaA==", "creation": "2026-01-01T00:00:00Z", "language": "en", "data": "iVBORw=="},
  "cronTiming": {"repeat": {"period": 2, "dayOfWeek": ["mon", "fri"]}},
  "cronString": "30 2 * * *",
  "category": [{"coding": [{"system": "https://example.org/cat", "version": "1", "code": "ops", "display": "Ops", "userSelected": false}], "text": "Ops"}],
  "system": false,
  "publicWebhook": true,
  "webhookRawBodyEnabled": true,
  "streamingEnabled": false,
  "auditEventTrigger": "on-error",
  "auditEventDestination": ["resource", "log"],
  "cdsService": {"hook": "patient-view", "title": "T", "description": "D", "usageRequirements": "U", "prefetch": [{"key": "patient", "query": "Patient/{{context.patientId}}"}]},
  "code": "exports.handler = async () => 1;"
}`

func TestBotRoundTripsEveryMedplumElement(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	bot, err := DecodeBot([]byte(medplumBot))
	if err != nil {
		t.Fatal(err)
	}
	if bot.MaxConcurrent != 4 || len(bot.Secret) != 2 || bot.Secret[0].ValueString != "s3cret" || *bot.Secret[1].ValueInteger != 3 {
		t.Fatalf("fhirgate extensions not read into their fields: maxConcurrent %d, secret %+v", bot.MaxConcurrent, bot.Secret)
	}
	if len(bot.Extension) != 1 {
		t.Fatalf("foreign extensions %d, want the one", len(bot.Extension))
	}
	bot.Meta.Project = p.ID
	bot.Meta.Tag = []Coding{{System: "https://example.org/tags", Code: "nightly"}}
	mustCreate(t, s, bot)
	got, err := Get[Bot](ctx, s, bot.ID)
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var want, have map[string]any
	if err := json.Unmarshal([]byte(medplumBot), &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &have); err != nil {
		t.Fatal(err)
	}
	meta := have["meta"].(map[string]any)
	if meta["project"] != p.ID || meta["versionId"] == nil || meta["lastUpdated"] == nil {
		t.Fatalf("meta %v", meta)
	}
	if tags, _ := meta["tag"].([]any); len(tags) != 1 {
		t.Fatalf("meta.tag %v, want the one tag", meta["tag"])
	}
	delete(have, "meta")
	delete(have, "id")
	if !reflect.DeepEqual(want, have) {
		a, _ := json.MarshalIndent(want, "", " ")
		b, _ := json.MarshalIndent(have, "", " ")
		t.Fatalf("round trip changed the bot\nsent %s\ngot  %s", a, b)
	}
}

func TestBotRefusesUnknownElements(t *testing.T) {
	for _, body := range []string{
		`{"resourceType":"Bot","name":"b","colour":"red"}`,
		`{"resourceType":"Bot","name":"b","cdsService":{"hook":"h","title":"t","description":"d","extra":1}}`,
		`{"resourceType":"Bot","name":"b","meta":{"colour":"red"}}`,
		`{"resourceType":"Bot","name":"b","cronTiming":{"repeat":{"period":1,"colour":"red"}}}`,
		`{"resourceType":"Bot","name":"b"} {}`,
	} {
		if _, err := DecodeBot([]byte(body)); err == nil {
			t.Errorf("DecodeBot(%s) accepted it", body)
		}
	}
	// What Medplum's server puts in meta is accepted and dropped.
	b, err := DecodeBot([]byte(`{"resourceType":"Bot","name":"b","meta":{"author":{"reference":"Practitioner/1"},"compartment":[{"reference":"Project/x"}],"versionId":"v"}}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(b)
	if strings.Contains(string(out), "author") || strings.Contains(string(out), "compartment") {
		t.Fatalf("server meta kept: %s", out)
	}
}

func TestBotValidatesItsElements(t *testing.T) {
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	for field, body := range map[string]string{
		"auditEventDestination[0]":       `{"name":"b","auditEventDestination":["disk"]}`,
		"cdsService.title":               `{"name":"b","cdsService":{"hook":"h","title":"","description":"d"}}`,
		"extension[0]":                   `{"name":"b","extension":[{"valueString":"no url"}]}`,
		"cronString":                     `{"name":"b","cronString":"every day"}`,
		"cronTiming.repeat.frequency":    `{"name":"b","cronTiming":{"repeat":{"frequency":2,"period":1}}}`,
		"maxConcurrent":                  `{"name":"b","extension":[{"url":"https://fhirgate.dev/fhir/StructureDefinition/bot-max-concurrent","valueInteger":-3}]}`,
		"runtimeVersion":                 `{"name":"b","runtimeVersion":"node"}`,
		"cronTiming.repeat.dayOfWeek[0]": `{"name":"b","cronTiming":{"repeat":{"dayOfWeek":["monday"]}}}`,
	} {
		b, err := DecodeBot([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		b.Meta.Project = p.ID
		err = s.Create(context.Background(), b, PutOptions{})
		var verr *ValidationError
		if !errors.As(err, &verr) || verr.Field != field {
			t.Errorf("%s: err %v, want a validation error on %s", body, err, field)
		}
	}
}

// A bot stored before fhirgate's settings became extensions has them under
// their old names; it reads the same and is written back as extensions.
func TestBotReadsTheOldNamesOfItsSettings(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	old := `{"resourceType":"Bot","id":"0193a0b0-0000-7000-8000-000000000001","meta":{"versionId":"v1","lastUpdated":"2026-01-01T00:00:00.000Z","project":"` + p.ID + `"},` +
		`"name":"legacy","secret":[{"name":"TOKEN","valueString":"t"}],"maxConcurrent":2}`
	if err := s.KV().Update(ctx, func(tx Txn) error {
		return tx.Set(recordKey("Bot", "0193a0b0-0000-7000-8000-000000000001"), []byte(old), 0)
	}); err != nil {
		t.Fatal(err)
	}
	bot, err := Get[Bot](ctx, s, "0193a0b0-0000-7000-8000-000000000001")
	if err != nil {
		t.Fatal(err)
	}
	if bot.MaxConcurrent != 2 || len(bot.Secret) != 1 || bot.Secret[0].Name != "TOKEN" || bot.Secret[0].ValueString != "t" {
		t.Fatalf("old names not read: %+v %+v", bot.MaxConcurrent, bot.Secret)
	}
	out, _ := json.Marshal(bot)
	if strings.Contains(string(out), `"secret"`) || strings.Contains(string(out), `"maxConcurrent"`) {
		t.Fatalf("old names written: %s", out)
	}
	if !strings.Contains(string(out), BotSecretURL) || !strings.Contains(string(out), BotMaxConcurrentURL) {
		t.Fatalf("settings not written as extensions: %s", out)
	}
	if _, err := s.Put(ctx, bot, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := Get[Bot](ctx, s, bot.ID)
	if err != nil {
		t.Fatal(err)
	}
	if again.MaxConcurrent != 2 || !reflect.DeepEqual(again.Secret, bot.Secret) {
		t.Fatalf("settings lost on rewrite: %d %+v", again.MaxConcurrent, again.Secret)
	}
}
