package store

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/robfig/cron/v3"
)

// Timing is a FHIR Timing as Bot.cronTiming holds it. Every element is
// accepted so a Bot decodes; the schedule reads only repeat.period and
// repeat.dayOfWeek, as Medplum does, and a Bot with any other element set
// is refused (validate) rather than scheduled differently from what it
// says.
type Timing struct {
	Event  json.RawMessage `json:"event,omitempty"`
	Repeat *TimingRepeat   `json:"repeat,omitempty"`
	Code   json.RawMessage `json:"code,omitempty"`
}

// TimingRepeat is Timing.repeat.
type TimingRepeat struct {
	// Period is, as Medplum reads it, how many times a day the bot runs
	// (default 1): above 24 and below 60 it runs every
	// ceil(1440/period) minutes, otherwise every ceil(24/period) hours.
	Period *float64 `json:"period,omitempty"`
	// DayOfWeek limits the runs to these days (mon … sun).
	DayOfWeek []string `json:"dayOfWeek,omitempty"`

	BoundsDuration json.RawMessage `json:"boundsDuration,omitempty"`
	BoundsRange    json.RawMessage `json:"boundsRange,omitempty"`
	BoundsPeriod   json.RawMessage `json:"boundsPeriod,omitempty"`
	Count          json.RawMessage `json:"count,omitempty"`
	CountMax       json.RawMessage `json:"countMax,omitempty"`
	Duration       json.RawMessage `json:"duration,omitempty"`
	DurationMax    json.RawMessage `json:"durationMax,omitempty"`
	DurationUnit   json.RawMessage `json:"durationUnit,omitempty"`
	Frequency      json.RawMessage `json:"frequency,omitempty"`
	FrequencyMax   json.RawMessage `json:"frequencyMax,omitempty"`
	PeriodMax      json.RawMessage `json:"periodMax,omitempty"`
	PeriodUnit     json.RawMessage `json:"periodUnit,omitempty"`
	TimeOfDay      json.RawMessage `json:"timeOfDay,omitempty"`
	When           json.RawMessage `json:"when,omitempty"`
	Offset         json.RawMessage `json:"offset,omitempty"`
}

// cronParser reads five-field cron expressions (minute hour day-of-month
// month day-of-week), without robfig's @descriptors, which Medplum's
// validator refuses too.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// ParseCron parses a five-field cron expression, evaluated in UTC.
func ParseCron(expr string) (cron.Schedule, error) {
	s := strings.TrimSpace(expr)
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("%q: schedules are in UTC; a time zone cannot be given", expr)
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%q is not a five-field cron expression (minute hour day-of-month month day-of-week): %v", expr, err)
	}
	return sched, nil
}

// daysOfWeek maps FHIR day codes to cron's day-of-week numbers.
var daysOfWeek = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// TimingToCron converts a cronTiming to the cron expression Medplum
// derives from it (its server's convertTimingToCron): only repeat.period
// and repeat.dayOfWeek are read, so any other element is an error naming
// it.
func TimingToCron(t *Timing) (string, error) {
	if len(t.Event) > 0 {
		return "", invalid("cronTiming.event", "is not supported; a schedule reads repeat.period and repeat.dayOfWeek")
	}
	if len(t.Code) > 0 {
		return "", invalid("cronTiming.code", "is not supported; a schedule reads repeat.period and repeat.dayOfWeek")
	}
	r := t.Repeat
	if r == nil {
		return "", invalid("cronTiming.repeat", "is required: a schedule reads repeat.period and repeat.dayOfWeek")
	}
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{
		{"boundsDuration", r.BoundsDuration}, {"boundsRange", r.BoundsRange}, {"boundsPeriod", r.BoundsPeriod},
		{"count", r.Count}, {"countMax", r.CountMax}, {"duration", r.Duration}, {"durationMax", r.DurationMax},
		{"durationUnit", r.DurationUnit}, {"frequency", r.Frequency}, {"frequencyMax", r.FrequencyMax},
		{"periodMax", r.PeriodMax}, {"periodUnit", r.PeriodUnit}, {"timeOfDay", r.TimeOfDay}, {"when", r.When},
		{"offset", r.Offset},
	} {
		if len(f.v) > 0 {
			return "", invalid("cronTiming.repeat."+f.name,
				"is not supported; a schedule reads repeat.period (times a day) and repeat.dayOfWeek, as Medplum does")
		}
	}
	period := 1.0
	if r.Period != nil && *r.Period != 0 {
		period = *r.Period
	}
	if period < 0 || math.IsNaN(period) || math.IsInf(period, 0) {
		return "", invalid("cronTiming.repeat.period", "must be a positive number (times a day)")
	}
	minute, hour := "0", "*"
	if period > 24 && period < 60 {
		minute = "*/" + strconv.Itoa(int(math.Ceil(24*60/period)))
	} else {
		hour = "*/" + strconv.Itoa(int(math.Ceil(24/period)))
	}
	dow := "*"
	if len(r.DayOfWeek) > 0 {
		days := make([]string, len(r.DayOfWeek))
		for i, d := range r.DayOfWeek {
			n, ok := daysOfWeek[d]
			if !ok {
				return "", invalid(fmt.Sprintf("cronTiming.repeat.dayOfWeek[%d]", i), fmt.Sprintf("%q is not one of mon, tue, wed, thu, fri, sat, sun", d))
			}
			days[i] = strconv.Itoa(n)
		}
		dow = strings.Join(days, ",")
	}
	return minute + " " + hour + " * * " + dow, nil
}

// Scheduled tells whether the bot has a schedule (cronTiming or
// cronString).
func (b *Bot) Scheduled() bool { return b.CronTiming != nil || strings.TrimSpace(b.CronString) != "" }

// Schedule returns the bot's schedule: cronTiming's when set (as Medplum,
// which prefers it), else cronString's; nil when it has none. A schedule
// that does not parse is a *ValidationError naming the element.
func (b *Bot) Schedule() (cron.Schedule, error) {
	if b.CronTiming != nil {
		expr, err := TimingToCron(b.CronTiming)
		if err != nil {
			return nil, err
		}
		sched, err := ParseCron(expr)
		if err != nil {
			return nil, invalid("cronTiming", err.Error())
		}
		return sched, nil
	}
	if strings.TrimSpace(b.CronString) == "" {
		return nil, nil
	}
	sched, err := ParseCron(b.CronString)
	if err != nil {
		return nil, invalid("cronString", err.Error())
	}
	return sched, nil
}
