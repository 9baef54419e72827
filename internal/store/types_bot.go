package store

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Bot is a JavaScript/TypeScript function run by the gateway. It has every
// element of Medplum's Bot (docs/bots.md "Bot resource" says which ones
// fhirgate acts on); its JSON form is Medplum's, with fhirgate's own
// settings as extensions (types_bot_json.go).
type Bot struct {
	base
	ImplicitRules string     `json:"implicitRules,omitempty"`
	Language      string     `json:"language,omitempty"`
	Text          *Narrative `json:"text,omitempty"`
	// Contained resources are kept as sent.
	Contained []json.RawMessage `json:"contained,omitempty"`
	// Extension holds the bot's extensions other than fhirgate's, which
	// are fields of their own (Secret, MaxConcurrent) and are added back
	// when the bot is encoded.
	Extension         []json.RawMessage `json:"-"`
	ModifierExtension []json.RawMessage `json:"modifierExtension,omitempty"`
	Identifier        []Identifier      `json:"identifier,omitempty"`
	Name              string            `json:"name"`
	Description       string            `json:"description,omitempty"`
	// RuntimeVersion is one of BotRuntimes, as Medplum names them:
	// "awslambda" (a warm instance per bot version whose module state may
	// carry from run to run) or "vmcontext" (a fresh runtime per run).
	// Empty (or Medplum's "fission", which fhirgate keeps but has no
	// runtime for) means the gateway's default (bot_default_runtime,
	// itself "awslambda" unless configured).
	RuntimeVersion string `json:"runtimeVersion,omitempty"`
	// Timeout is the run time limit in seconds, 0..900; 0 means the
	// gateway default.
	Timeout int         `json:"timeout,omitempty"`
	Photo   *Attachment `json:"photo,omitempty"`
	// CronTiming and CronString schedule the bot (types_bot_cron.go);
	// CronTiming wins when both are set, as in Medplum.
	CronTiming            *Timing           `json:"cronTiming,omitempty"`
	CronString            string            `json:"cronString,omitempty"`
	Category              []CodeableConcept `json:"category,omitempty"`
	System                *bool             `json:"system,omitempty"`
	PublicWebhook         *bool             `json:"publicWebhook,omitempty"`
	WebhookRawBodyEnabled *bool             `json:"webhookRawBodyEnabled,omitempty"`
	StreamingEnabled      *bool             `json:"streamingEnabled,omitempty"`
	// AuditEventTrigger is one of AuditEventTriggers; empty means always.
	AuditEventTrigger string `json:"auditEventTrigger,omitempty"`
	// AuditEventDestination lists where a run's AuditEvent goes besides
	// the gateway's store: "resource" (the FHIR backend) and "log".
	AuditEventDestination []string       `json:"auditEventDestination,omitempty"`
	SourceCode            *Attachment    `json:"sourceCode,omitempty"`
	ExecutableCode        *Attachment    `json:"executableCode,omitempty"`
	CDSService            *BotCDSService `json:"cdsService,omitempty"`
	// Code is Medplum's deprecated inline script, kept without effect.
	Code string `json:"code,omitempty"`
	// Secret is the bot's own secrets (event.secrets, over the project's).
	// fhirgate extension BotSecretURL; stored bots may still have them
	// under the old name "secret".
	Secret []ProjectSetting `json:"-"`
	// MaxConcurrent bounds this bot's simultaneous runs, within the
	// gateway's global bound; 0 means only the global bound applies.
	// fhirgate extension BotMaxConcurrentURL; stored bots may still have
	// it under the old name "maxConcurrent".
	MaxConcurrent int `json:"-"`
	// RunAsUser runs the bot as whoever triggered it (the caller of
	// $execute, the writer of a Subscription's resource) instead of as
	// itself (Bot/{id}), as Medplum's Bot.runAsUser. Bots stored before
	// bot identity existed were migrated with it set (MigrateBotIdentity).
	RunAsUser bool `json:"runAsUser,omitempty"`
}

// Narrative is a FHIR narrative (a resource's text).
type Narrative struct {
	Status string `json:"status"`
	Div    string `json:"div"`
}

// CodeableConcept is a FHIR CodeableConcept.
type CodeableConcept struct {
	Coding []Coding `json:"coding,omitempty"`
	Text   string   `json:"text,omitempty"`
}

// BotCDSService is Medplum's Bot.cdsService: the bot as a CDS Hooks
// service.
type BotCDSService struct {
	Hook              string                  `json:"hook"`
	Title             string                  `json:"title"`
	Description       string                  `json:"description"`
	UsageRequirements string                  `json:"usageRequirements,omitempty"`
	Prefetch          []BotCDSServicePrefetch `json:"prefetch,omitempty"`
}

// BotCDSServicePrefetch is one prefetch query of a CDS service.
type BotCDSServicePrefetch struct {
	Key   string `json:"key"`
	Query string `json:"query"`
}

// AuditEventDestinations are the values of Bot.AuditEventDestination.
var AuditEventDestinations = []string{"log", "resource"}

// AuditEventTriggers are the values of Bot.AuditEventTrigger, as Medplum
// names them: every run, no run, failed runs, runs that wrote to the console.
var AuditEventTriggers = []string{"always", "never", "on-error", "on-output"}

// BotRuntimes are the values of Bot.RuntimeVersion, as Medplum names them.
var BotRuntimes = []string{"awslambda", "vmcontext"}

// KnownBotRuntimes are the Bot.RuntimeVersion values accepted: BotRuntimes
// and Medplum's "fission", kept but run in the default runtime.
var KnownBotRuntimes = []string{"awslambda", "vmcontext", "fission"}

// Runtime is the runtime the bot asks for, one of BotRuntimes, or ""
// for the gateway's default (also for "fission", which fhirgate has none
// of).
func (b *Bot) Runtime() string {
	if slices.Contains(BotRuntimes, b.RuntimeVersion) {
		return b.RuntimeVersion
	}
	return ""
}

// MaxBotConcurrency is the largest Bot.MaxConcurrent.
const MaxBotConcurrency = 10000

// MaxBotTimeout is the largest Bot.Timeout, in seconds.
const MaxBotTimeout = 900

func (b *Bot) resourceType() string { return "Bot" }

func (b *Bot) validate() error {
	if err := checkProjectID("meta.project", b.Meta.Project, true); err != nil {
		return err
	}
	if err := checkRequired("name", b.Name); err != nil {
		return err
	}
	for i, id := range b.Identifier {
		if err := checkRequired(fmt.Sprintf("identifier[%d].value", i), id.Value); err != nil {
			return err
		}
		if err := checkIndexable(fmt.Sprintf("identifier[%d].value", i), id.Value); err != nil {
			return err
		}
		if err := checkIndexable(fmt.Sprintf("identifier[%d].system", i), id.System); err != nil {
			return err
		}
	}
	if b.RuntimeVersion != "" {
		if err := checkEnum("runtimeVersion", b.RuntimeVersion, KnownBotRuntimes...); err != nil {
			return err
		}
	}
	if b.Timeout < 0 || b.Timeout > MaxBotTimeout {
		return invalid("timeout", fmt.Sprintf("%d is not between 0 and %d seconds", b.Timeout, MaxBotTimeout))
	}
	if b.MaxConcurrent < 0 || b.MaxConcurrent > MaxBotConcurrency {
		return invalid("maxConcurrent", fmt.Sprintf("%d is not between 0 and %d", b.MaxConcurrent, MaxBotConcurrency))
	}
	if b.SourceCode != nil && b.SourceCode.URL != "" {
		if _, _, err := checkReference("sourceCode.url", b.SourceCode.URL, "Binary"); err != nil {
			return err
		}
	}
	if b.ExecutableCode != nil && b.ExecutableCode.URL != "" {
		if _, _, err := checkReference("executableCode.url", b.ExecutableCode.URL, "Binary"); err != nil {
			return err
		}
	}
	if b.AuditEventTrigger != "" {
		if err := checkEnum("auditEventTrigger", b.AuditEventTrigger, AuditEventTriggers...); err != nil {
			return err
		}
	}
	for i, d := range b.AuditEventDestination {
		if err := checkEnum(fmt.Sprintf("auditEventDestination[%d]", i), d, AuditEventDestinations...); err != nil {
			return err
		}
	}
	if c := b.CDSService; c != nil {
		for _, f := range []struct{ name, v string }{{"hook", c.Hook}, {"title", c.Title}, {"description", c.Description}} {
			if err := checkRequired("cdsService."+f.name, f.v); err != nil {
				return err
			}
		}
		for i, p := range c.Prefetch {
			if err := checkRequired(fmt.Sprintf("cdsService.prefetch[%d].key", i), p.Key); err != nil {
				return err
			}
		}
	}
	if err := checkExtensions("extension", b.Extension); err != nil {
		return err
	}
	if err := checkExtensions("modifierExtension", b.ModifierExtension); err != nil {
		return err
	}
	if _, err := b.Schedule(); err != nil {
		return err
	}
	if b.CronTiming != nil && b.CronString != "" {
		// cronTiming wins, but a cronString kept beside it must still parse.
		if _, err := ParseCron(b.CronString); err != nil {
			return invalid("cronString", err.Error())
		}
	}
	return checkSettings("secret", b.Secret)
}

func (b *Bot) references() []mustExist {
	return []mustExist{{"meta.project", "Project", b.Meta.Project}}
}

// keptVersions bounds the prior versions of a Bot the store keeps for
// Bot/{id}/_history.
func (b *Bot) keptVersions() int { return BotVersionsKept }

// BotVersionsKept is how many prior versions of a Bot the store keeps,
// besides the current one; older ones are dropped as new ones come.
const BotVersionsKept = 20

func (b *Bot) indexes() []indexEntry {
	var out []indexEntry
	if b.Scheduled() {
		out = append(out, indexEntry{key: indexKey(idxBotCron, b.ID)})
	}
	seen := make(map[Identifier]bool, len(b.Identifier))
	values := make([]string, 0, len(b.Identifier))
	for _, id := range b.Identifier {
		if seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, indexEntry{
			key:    uniqueKey(idxBotIdentifier, b.Meta.Project, id.System, id.Value),
			unique: true,
			what:   fmt.Sprintf("a Bot with identifier %q in project %s", id.System+"|"+id.Value, b.Meta.Project),
		})
		if !slices.Contains(values, id.Value) {
			values = append(values, id.Value)
			out = append(out, indexEntry{key: indexKey(idxBotIdentifierValue, b.ID, b.Meta.Project, id.Value)})
		}
	}
	return out
}

// Binary is raw content, base64 in Data; fhirgate keeps bot source and
// compiled code in Binaries. Treat them as immutable: write a new one
// instead of replacing.
type Binary struct {
	base
	ContentType string `json:"contentType"`
	Data        string `json:"data,omitempty"`
}

func (b *Binary) resourceType() string { return "Binary" }

func (b *Binary) validate() error {
	if err := checkProjectID("meta.project", b.Meta.Project, false); err != nil {
		return err
	}
	if err := checkRequired("contentType", b.ContentType); err != nil {
		return err
	}
	return checkBase64("data", b.Data)
}

func (b *Binary) references() []mustExist {
	if b.Meta.Project == "" {
		return nil
	}
	return []mustExist{{"meta.project", "Project", b.Meta.Project}}
}

// AuditEvent records one bot run (Medplum's shape). It is normally written
// with a retention TTL and listed newest first per bot.
type AuditEvent struct {
	base
	Type Coding `json:"type"`
	// Recorded is when the event was recorded (RFC 3339); the store sets
	// it to now when empty and normalizes it to UTC milliseconds.
	Recorded string  `json:"recorded"`
	Period   *Period `json:"period,omitempty"`
	// Outcome is a FHIR AuditEvent outcome code: "0" success, "4" minor
	// failure, "8" serious failure, "12" major failure.
	Outcome     string             `json:"outcome,omitempty"`
	OutcomeDesc string             `json:"outcomeDesc,omitempty"`
	Agent       []AuditEventAgent  `json:"agent,omitempty"`
	Source      AuditEventSource   `json:"source"`
	Entity      []AuditEventEntity `json:"entity,omitempty"`
	Extension   []Extension        `json:"extension,omitempty"`
}

// Extension is a FHIR extension with the value types fhirgate writes (a bot
// run's tracing extension). A struct, not a map, because every run encodes
// one: maps made it a sixth of the CPU of storing an AuditEvent.
type Extension struct {
	URL          string      `json:"url"`
	ValueID      string      `json:"valueId,omitempty"`
	ValueCode    string      `json:"valueCode,omitempty"`
	ValueInteger *int64      `json:"valueInteger,omitempty"`
	Extension    []Extension `json:"extension,omitempty"`
}

// AuditEventAgent is an actor of an audit event.
type AuditEventAgent struct {
	Who       Reference `json:"who"`
	Requestor bool      `json:"requestor"`
}

// AuditEventSource is the reporter of an audit event.
type AuditEventSource struct {
	Observer Reference `json:"observer"`
}

// AuditEventEntity is a resource an audit event is about.
type AuditEventEntity struct {
	What Reference `json:"what"`
}

func (a *AuditEvent) resourceType() string { return "AuditEvent" }

func (a *AuditEvent) allowsTTL() bool { return true }

func (a *AuditEvent) normalize(now time.Time) {
	if a.Recorded == "" {
		a.Recorded = FormatTime(now)
		return
	}
	if t, err := time.Parse(time.RFC3339Nano, a.Recorded); err == nil {
		a.Recorded = FormatTime(t)
	}
}

func (a *AuditEvent) validate() error {
	if err := checkProjectID("meta.project", a.Meta.Project, false); err != nil {
		return err
	}
	if err := checkTime("recorded", a.Recorded); err != nil {
		return err
	}
	if a.Period != nil {
		if err := checkTime("period.start", a.Period.Start); err != nil {
			return err
		}
		if err := checkTime("period.end", a.Period.End); err != nil {
			return err
		}
	}
	if a.Outcome != "" {
		if err := checkEnum("outcome", a.Outcome, "0", "4", "8", "12"); err != nil {
			return err
		}
	}
	return nil
}

// BotIDs returns the ids of the bots the event is about: Bot references in
// entity[].what and source.observer, deduplicated, in order of appearance.
func (a *AuditEvent) BotIDs() []string {
	var ids []string
	add := func(ref string) {
		if id := refID(ref, "Bot"); id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, e := range a.Entity {
		add(e.What.Reference)
	}
	add(a.Source.Observer.Reference)
	return ids
}

func (a *AuditEvent) indexes() []indexEntry {
	out := []indexEntry{{key: indexKey(idxAuditRecorded, a.ID, a.Recorded)}}
	for _, bot := range a.BotIDs() {
		out = append(out, indexEntry{key: indexKey(idxAuditBotRecorded, a.ID, bot, a.Recorded)})
	}
	return out
}
