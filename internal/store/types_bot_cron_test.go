package store

import (
	"context"
	"testing"
	"time"
)

func TestParseCron(t *testing.T) {
	at := time.Date(2026, 11, 25, 21, 17, 30, 0, time.UTC) // a Wednesday
	for _, tc := range []struct {
		expr string
		next string // "" means refused
	}{
		{"* * * * *", "2026-11-25T21:18:00Z"},
		{"*/15 * * * *", "2026-11-25T21:30:00Z"},
		{"0 3 * * *", "2026-11-26T03:00:00Z"},
		{"0 9 * * 1-5", "2026-11-26T09:00:00Z"},
		{"0 0 1 * *", "2026-12-01T00:00:00Z"},
		{"0 12 * * sun", "2026-11-29T12:00:00Z"},
		{"  5 4 * * *  ", "2026-11-26T04:05:00Z"},
		{"* * * *", ""},     // four fields
		{"0 * * * * *", ""}, // six fields (seconds)
		{"@daily", ""},      // descriptors
		{"@every 1m", ""},   // descriptors
		{"61 * * * *", ""},  // out of range
		{"TZ=Europe/Paris 0 3 * * *", ""},
		{"CRON_TZ=UTC 0 3 * * *", ""},
		{"every day", ""},
	} {
		sched, err := ParseCron(tc.expr)
		if tc.next == "" {
			if err == nil {
				t.Errorf("ParseCron(%q) accepted it", tc.expr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseCron(%q): %v", tc.expr, err)
			continue
		}
		if got := sched.Next(at).UTC().Format(time.RFC3339); got != tc.next {
			t.Errorf("ParseCron(%q).Next = %s, want %s", tc.expr, got, tc.next)
		}
	}
}

// The conversions of Medplum's server (workers/cron.ts convertTimingToCron).
func TestTimingToCron(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name  string
		t     Timing
		want  string
		field string // the element refused, when want is ""
	}{
		{"no period is once a day", Timing{Repeat: &TimingRepeat{}}, "0 */24 * * *", ""},
		{"period 1", Timing{Repeat: &TimingRepeat{Period: f(1)}}, "0 */24 * * *", ""},
		{"period 24 is hourly", Timing{Repeat: &TimingRepeat{Period: f(24)}}, "0 */1 * * *", ""},
		{"period 3", Timing{Repeat: &TimingRepeat{Period: f(3)}}, "0 */8 * * *", ""},
		{"period 48 is every 30 minutes", Timing{Repeat: &TimingRepeat{Period: f(48)}}, "*/30 * * * *", ""},
		{"period 25", Timing{Repeat: &TimingRepeat{Period: f(25)}}, "*/58 * * * *", ""},
		{"period 60 is hourly again", Timing{Repeat: &TimingRepeat{Period: f(60)}}, "0 */1 * * *", ""},
		{"days", Timing{Repeat: &TimingRepeat{Period: f(1), DayOfWeek: []string{"mon", "wed", "sun"}}}, "0 */24 * * 1,3,0", ""},
		{"no repeat", Timing{}, "", "cronTiming.repeat"},
		{"frequency", Timing{Repeat: &TimingRepeat{Frequency: []byte(`2`)}}, "", "cronTiming.repeat.frequency"},
		{"periodUnit", Timing{Repeat: &TimingRepeat{PeriodUnit: []byte(`"h"`)}}, "", "cronTiming.repeat.periodUnit"},
		{"timeOfDay", Timing{Repeat: &TimingRepeat{TimeOfDay: []byte(`["09:00:00"]`)}}, "", "cronTiming.repeat.timeOfDay"},
		{"event", Timing{Event: []byte(`["2026-01-01"]`), Repeat: &TimingRepeat{}}, "", "cronTiming.event"},
		{"code", Timing{Code: []byte(`{"text":"BID"}`), Repeat: &TimingRepeat{}}, "", "cronTiming.code"},
		{"negative period", Timing{Repeat: &TimingRepeat{Period: f(-2)}}, "", "cronTiming.repeat.period"},
		{"bad day", Timing{Repeat: &TimingRepeat{DayOfWeek: []string{"xyz"}}}, "", "cronTiming.repeat.dayOfWeek[0]"},
	} {
		got, err := TimingToCron(&tc.t)
		if tc.want != "" {
			if err != nil || got != tc.want {
				t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
			}
			if _, err := ParseCron(got); err != nil {
				t.Errorf("%s: %q does not parse: %v", tc.name, got, err)
			}
			continue
		}
		verr, ok := err.(*ValidationError)
		if !ok || verr.Field != tc.field {
			t.Errorf("%s: %q, %v; want a validation error on %s", tc.name, got, err, tc.field)
		}
	}
}

func TestBotScheduleAndIndex(t *testing.T) {
	ctx := context.Background()
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	seedBot(t, s, p, "plain")
	timed := mustCreate(t, s, &Bot{base: Base{Meta: Meta{Project: p.ID}}, Name: "timed", CronString: "0 3 * * *", CronTiming: &Timing{Repeat: &TimingRepeat{}}})
	sched, err := timed.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	// cronTiming wins over cronString, as in Medplum.
	if got := sched.Next(time.Date(2026, 1, 1, 1, 0, 0, 0, time.UTC)); !got.Equal(time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("next %s, want midnight (cronTiming's)", got)
	}
	list := func() []string {
		bots, err := s.ScheduledBots(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, b := range bots {
			names = append(names, b.Name)
		}
		return names
	}
	if got := list(); len(got) != 1 || got[0] != "timed" {
		t.Fatalf("scheduled %v, want [timed]", got)
	}
	timed.CronString, timed.CronTiming = "", nil
	if _, err := s.Put(ctx, timed, PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("scheduled %v after the schedule was removed", got)
	}
}

// Medplum's "fission" runtime is kept, and runs in the gateway's default.
func TestBotFissionRuntimeIsKeptAndRunsInTheDefault(t *testing.T) {
	s := newTestStore(t)
	p := seedProject(t, s, "p")
	bot := mustCreate(t, s, &Bot{base: Base{Meta: Meta{Project: p.ID}}, Name: "f", RuntimeVersion: "fission"})
	if bot.RuntimeVersion != "fission" || bot.Runtime() != "" {
		t.Fatalf("runtimeVersion %q, Runtime() %q", bot.RuntimeVersion, bot.Runtime())
	}
	if (&Bot{RuntimeVersion: "vmcontext"}).Runtime() != "vmcontext" {
		t.Fatal("vmcontext not kept as the runtime")
	}
}
