package botrunner

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // IANA time zones on any host, for Intl's timeZone

	"github.com/dop251/goja"
)

// dateTimeFormat is a resolved Intl.DateTimeFormat (en-US).
type dateTimeFormat struct {
	locale, zoneName string
	zone             *time.Location
	// Field widths, "" when the field is not shown.
	weekday, year, month, day, hour, minute, second, tzName string
	dateStyle, timeStyle                                    string
	h23                                                     bool // 24-hour clock
}

var (
	weekdayValues = []string{"narrow", "short", "long"}
	monthValues   = []string{"2-digit", "numeric", "narrow", "short", "long"}
	numericValues = []string{"2-digit", "numeric"}
	styleValues   = []string{"full", "long", "medium", "short"}
)

const dtfClass = "Intl.DateTimeFormat"

// newDateTimeFormat resolves locales and options as ECMA-402's CreateDateTimeFormat with
// ToDateTimeOptions(required, defaults): the Intl.DateTimeFormat constructor is any/date,
// toLocaleString any/all, toLocaleDateString date/date, toLocaleTimeString time/time.
func (x *execution) newDateTimeFormat(locales, options goja.Value, required, defaults string) *dateTimeFormat {
	f := &dateTimeFormat{locale: x.intlLocale(locales)}
	o := x.intlOptions(options)
	x.optString(o, dtfClass, "localeMatcher", []string{"lookup", "best fit"}, nil)
	x.optString(o, dtfClass, "formatMatcher", []string{"basic", "best fit"}, nil)
	x.optString(o, dtfClass, "calendar", nil, []string{"gregory", "iso8601"})
	x.optString(o, dtfClass, "numberingSystem", nil, []string{"latn"})
	x.rejectOptions(o, dtfClass, "era", "dayPeriod", "fractionalSecondDigits")
	hour12 := optBool(o, "hour12")
	hourCycle := x.optString(o, dtfClass, "hourCycle", []string{"h11", "h12", "h23", "h24"}, []string{"h12", "h23"})
	f.zone, f.zoneName = x.intlZone(o)
	f.weekday = x.optString(o, dtfClass, "weekday", weekdayValues, nil)
	f.year = x.optString(o, dtfClass, "year", numericValues, nil)
	f.month = x.optString(o, dtfClass, "month", monthValues, nil)
	f.day = x.optString(o, dtfClass, "day", numericValues, nil)
	f.hour = x.optString(o, dtfClass, "hour", numericValues, nil)
	f.minute = x.optString(o, dtfClass, "minute", numericValues, nil)
	f.second = x.optString(o, dtfClass, "second", numericValues, nil)
	f.tzName = x.optString(o, dtfClass, "timeZoneName",
		[]string{"short", "long", "shortOffset", "longOffset", "shortGeneric", "longGeneric"}, []string{"short", "long"})
	f.dateStyle = x.optString(o, dtfClass, "dateStyle", styleValues, nil)
	f.timeStyle = x.optString(o, dtfClass, "timeStyle", styleValues, nil)
	switch {
	case hour12 == 2:
		f.h23 = false
	case hour12 == 1:
		f.h23 = true
	default:
		f.h23 = hourCycle == "h23"
	}

	hasDate := f.weekday != "" || f.year != "" || f.month != "" || f.day != ""
	hasTime := f.hour != "" || f.minute != "" || f.second != ""
	if f.dateStyle != "" || f.timeStyle != "" {
		if hasDate || hasTime || f.tzName != "" {
			panic(x.rt.NewTypeError("Invalid option : option"))
		}
		if required == "date" && f.dateStyle == "" {
			panic(x.rt.NewTypeError("Invalid option : timeStyle"))
		}
		if required == "time" && f.timeStyle == "" {
			panic(x.rt.NewTypeError("Invalid option : dateStyle"))
		}
		f.applyStyles()
	} else {
		need := true
		if (required == "date" || required == "any") && hasDate {
			need = false
		}
		if (required == "time" || required == "any") && hasTime {
			need = false
		}
		if need && (defaults == "date" || defaults == "all") {
			f.year, f.month, f.day = "numeric", "numeric", "numeric"
		}
		if need && (defaults == "time" || defaults == "all") {
			f.hour, f.minute, f.second = "numeric", "numeric", "numeric"
		}
	}
	if d := f.dateFields(); !supportedDateFields[d] {
		panic(x.intlUnsupported(dtfClass + " with the fields " + strings.Join(f.fieldNames(), ", ")))
	}
	if t := f.timeFields(); !supportedTimeFields[t] {
		panic(x.intlUnsupported(dtfClass + " with the fields " + strings.Join(f.fieldNames(), ", ")))
	}
	if f.tzName == "long" && !longZoneNameKnown(f.zone, f.zoneName) {
		panic(x.intlUnsupported(fmt.Sprintf("%s timeZoneName 'long' for the time zone %s", dtfClass, f.zoneName)))
	}
	return f
}

// applyStyles turns dateStyle and timeStyle into the fields ICU's en-US patterns show.
func (f *dateTimeFormat) applyStyles() {
	switch f.dateStyle {
	case "full":
		f.weekday, f.month, f.day, f.year = "long", "long", "numeric", "numeric"
	case "long":
		f.month, f.day, f.year = "long", "numeric", "numeric"
	case "medium":
		f.month, f.day, f.year = "short", "numeric", "numeric"
	case "short":
		f.month, f.day, f.year = "numeric", "numeric", "2-digit"
	}
	switch f.timeStyle {
	case "full":
		f.hour, f.minute, f.second, f.tzName = "numeric", "2-digit", "2-digit", "long"
	case "long":
		f.hour, f.minute, f.second, f.tzName = "numeric", "2-digit", "2-digit", "short"
	case "medium":
		f.hour, f.minute, f.second = "numeric", "2-digit", "2-digit"
	case "short":
		f.hour, f.minute = "numeric", "2-digit"
	}
}

// The combinations of fields whose en-US patterns this reproduces (W weekday, Y year, M month,
// D day; h hour, m minute, s second). ICU has patterns for the others too, but odd ones
// ("2026 (day: 5)") that are not worth copying.
var (
	supportedDateFields = map[string]bool{"": true, "D": true, "M": true, "Y": true, "MD": true, "YM": true,
		"YMD": true, "W": true, "WMD": true, "WYMD": true}
	supportedTimeFields = map[string]bool{"": true, "h": true, "hm": true, "hms": true, "ms": true}
)

func (f *dateTimeFormat) dateFields() string {
	s := ""
	for _, c := range []struct {
		v, k string
	}{{f.weekday, "W"}, {f.year, "Y"}, {f.month, "M"}, {f.day, "D"}} {
		if c.v != "" {
			s += c.k
		}
	}
	return s
}

func (f *dateTimeFormat) timeFields() string {
	s := ""
	for _, c := range []struct {
		v, k string
	}{{f.hour, "h"}, {f.minute, "m"}, {f.second, "s"}} {
		if c.v != "" {
			s += c.k
		}
	}
	return s
}

func (f *dateTimeFormat) fieldNames() []string {
	var n []string
	for _, c := range []struct{ v, k string }{{f.weekday, "weekday"}, {f.year, "year"}, {f.month, "month"},
		{f.day, "day"}, {f.hour, "hour"}, {f.minute, "minute"}, {f.second, "second"}} {
		if c.v != "" {
			n = append(n, c.k)
		}
	}
	return n
}

// zoneCache holds the time zones loaded (the host's database or the one embedded), by name:
// loading one reads and parses its file, which a run should not pay for each format.
var (
	zoneCache  sync.Map
	zoneCached atomic.Int64 // entries stored, to bound the cache
)

// maxCachedZones is above the ~600 names of the IANA database.
const maxCachedZones = 2000

// intlZone resolves the timeZone option: an IANA name (any case), or the process's zone.
func (x *execution) intlZone(o *goja.Object) (*time.Location, string) {
	var v goja.Value
	if o != nil {
		v = o.Get("timeZone")
	}
	if v == nil || goja.IsUndefined(v) {
		return time.Local, localZoneName()
	}
	name := v.String()
	switch strings.ToUpper(name) {
	case "UTC", "ETC/UTC", "GMT", "ETC/GMT", "ETC/UCT", "UCT", "ETC/ZULU", "ZULU", "ETC/UNIVERSAL", "UNIVERSAL":
		return time.UTC, "UTC"
	}
	for _, n := range []string{name, titleZone(name)} {
		if loc, ok := zoneCache.Load(n); ok {
			return loc.(*time.Location), n
		}
		if loc := loadZone(n); loc != nil {
			// Names load in the database's spelling (or, on a host whose zoneinfo directory
			// ignores case, in any): the cache is bounded all the same.
			if zoneCached.Add(1) <= maxCachedZones {
				zoneCache.Store(n, loc)
			}
			return loc, n
		}
	}
	panic(x.newError("RangeError", "Invalid time zone specified: "+truncate(name, 60)))
}

func loadZone(name string) *time.Location {
	// Only names of the database: not "Local" (the host's), not paths.
	if name == "" || name == "Local" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") || len(name) > 64 {
		return nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil
	}
	return loc
}

// titleZone is an IANA name in its usual case: america/new_york → America/New_York.
func titleZone(name string) string {
	b := []byte(strings.ToLower(name))
	up := true
	for i, c := range b {
		if up && 'a' <= c && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
		up = c == '/' || c == '_' || c == '-'
	}
	return string(b)
}

func localZoneName() string {
	if tz := strings.TrimPrefix(os.Getenv("TZ"), ":"); tz != "" && loadZone(tz) != nil {
		return tz
	}
	if _, off := time.Now().Zone(); off == 0 {
		return "UTC"
	}
	return time.Local.String()
}

var (
	monthsLong  = []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"}
	weekdayLong = []string{"Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"}
)

// usZoneNames are the en-US names ICU gives the North American zones (which it abbreviates);
// every other zone's short name is its GMT offset.
var usZoneNames = map[string]string{
	"EST": "Eastern Standard Time", "EDT": "Eastern Daylight Time",
	"CST": "Central Standard Time", "CDT": "Central Daylight Time",
	"MST": "Mountain Standard Time", "MDT": "Mountain Daylight Time",
	"PST": "Pacific Standard Time", "PDT": "Pacific Daylight Time",
	"AKST": "Alaska Standard Time", "AKDT": "Alaska Daylight Time",
	"HST": "Hawaii-Aleutian Standard Time", "HDT": "Hawaii-Aleutian Daylight Time",
	"AST": "Atlantic Standard Time", "ADT": "Atlantic Daylight Time",
}

func usZone(loc *time.Location) bool {
	n := loc.String()
	return strings.HasPrefix(n, "America/") || n == "Pacific/Honolulu" || strings.HasPrefix(n, "US/")
}

// zoneName is the short or long name of loc at t.
func zoneName(loc *time.Location, t time.Time, style string) string {
	if loc == time.UTC {
		if style == "long" {
			return "Coordinated Universal Time"
		}
		return "UTC"
	}
	abbr, off := t.Zone()
	if long, ok := usZoneNames[abbr]; ok && usZone(loc) {
		if style == "long" {
			return long
		}
		return abbr
	}
	if off == 0 {
		return "GMT"
	}
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	s := "GMT" + sign + strconv.Itoa(off/3600)
	if m := off % 3600 / 60; m != 0 {
		s += fmt.Sprintf(":%02d", m)
	}
	return s
}

// longZoneNameKnown reports whether every name loc has had lately or will have soon is one
// zoneName can spell out.
func longZoneNameKnown(loc *time.Location, name string) bool {
	if loc == time.UTC {
		return true
	}
	if !usZone(loc) {
		return false
	}
	now := time.Now()
	for _, t := range []time.Time{now, now.AddDate(0, 6, 0)} {
		if abbr, _ := t.In(loc).Zone(); usZoneNames[abbr] == "" {
			return false
		}
	}
	return true
}

// parts formats the time value ms (milliseconds since the epoch) as ICU's en-US pattern for f.
func (f *dateTimeFormat) parts(x *execution, ms float64) []intlPart {
	if math.IsNaN(ms) || math.IsInf(ms, 0) || math.Abs(ms) > 8.64e15 {
		panic(x.newError("RangeError", "Invalid time value"))
	}
	t := time.UnixMilli(int64(ms)).In(f.zone)
	if t.Year() < 1 {
		panic(x.intlUnsupported(dtfClass + " of a date before the year 1"))
	}
	var ps []intlPart
	lit := func(s string) { ps = append(ps, intlPart{"literal", s}) }
	add := func(typ, s string) { ps = append(ps, intlPart{typ, s}) }
	num := func(v int, width string) string {
		if width == "2-digit" {
			return fmt.Sprintf("%02d", v%100)
		}
		return strconv.Itoa(v)
	}

	textMonth := f.month == "long" || f.month == "short" || f.month == "narrow"
	date := f.dateFields()
	if date != "" {
		if f.weekday != "" {
			add("weekday", dateName(weekdayLong[t.Weekday()], f.weekday))
			if date != "W" {
				lit(", ")
			}
		}
		year := func() { add("year", num(t.Year(), f.year)) }
		switch {
		case textMonth:
			if f.month != "" {
				add("month", dateName(monthsLong[t.Month()-1], f.month))
			}
			if f.day != "" {
				lit(" ")
				add("day", num(t.Day(), f.day))
				if f.year != "" {
					lit(", ")
					year()
				}
			} else if f.year != "" {
				lit(" ")
				year()
			}
		default: // numeric month, or no month: M/D/Y
			first := true
			sep := func() {
				if !first {
					lit("/")
				}
				first = false
			}
			if f.month != "" {
				sep()
				add("month", num(int(t.Month()), f.month))
			}
			if f.day != "" {
				sep()
				add("day", num(t.Day(), f.day))
			}
			if f.year != "" {
				sep()
				year()
			}
		}
	}
	timeFields := f.timeFields()
	if timeFields != "" {
		switch {
		case date == "":
		case date == "W" && f.hour != "" && f.tzName == "" && !(f.h23 && timeFields == "h"):
			// ICU has "EEEE h:mm a"-like patterns for these only; the rest join with ", ".
			lit(" ")
		case f.month == "long":
			lit(" at ")
		default:
			lit(", ")
		}
		if f.hour != "" {
			h := t.Hour()
			switch {
			case f.h23:
				add("hour", fmt.Sprintf("%02d", h))
			default:
				h12 := h % 12
				if h12 == 0 {
					h12 = 12
				}
				add("hour", num(h12, f.hour))
			}
		}
		if f.minute != "" {
			if f.hour != "" {
				lit(":")
			}
			add("minute", fmt.Sprintf("%02d", t.Minute()))
		}
		if f.second != "" {
			lit(":")
			add("second", fmt.Sprintf("%02d", t.Second()))
		}
		if f.hour != "" && !f.h23 {
			lit("\u202f") // ICU's; format gives a space, as V8 does (joinParts)
			if t.Hour() < 12 {
				add("dayPeriod", "AM")
			} else {
				add("dayPeriod", "PM")
			}
		}
	}
	if f.tzName != "" {
		if timeFields != "" {
			lit(" ")
		} else {
			lit(", ")
		}
		add("timeZoneName", zoneName(f.zone, t, f.tzName))
	}
	return ps
}

// dateName is a month or weekday name at a width.
func dateName(long, width string) string {
	switch width {
	case "short":
		return long[:3]
	case "narrow":
		return long[:1]
	}
	return long
}

// object is the Intl.DateTimeFormat instance of f.
func (f *dateTimeFormat) object(x *execution) *goja.Object {
	rt := x.rt
	o := rt.NewObject()
	timeValue := func(v goja.Value) float64 {
		if goja.IsUndefined(v) {
			return float64(time.Now().UnixMilli())
		}
		return v.ToNumber().ToFloat()
	}
	_ = o.Set("format", x.fn("format", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(joinParts(f.parts(x, timeValue(c.Argument(0)))))
	}))
	_ = o.Set("formatToParts", x.fn("formatToParts", func(c goja.FunctionCall) goja.Value {
		return x.partsArray(f.parts(x, timeValue(c.Argument(0))))
	}))
	_ = o.Set("resolvedOptions", x.fn("resolvedOptions", func(goja.FunctionCall) goja.Value {
		r := rt.NewObject()
		_ = r.Set("locale", f.locale)
		_ = r.Set("calendar", "gregory")
		_ = r.Set("numberingSystem", "latn")
		_ = r.Set("timeZone", f.zoneName)
		if f.hour != "" {
			if f.h23 {
				_ = r.Set("hourCycle", "h23")
			} else {
				_ = r.Set("hourCycle", "h12")
			}
			_ = r.Set("hour12", !f.h23)
		}
		if f.dateStyle != "" || f.timeStyle != "" {
			if f.dateStyle != "" {
				_ = r.Set("dateStyle", f.dateStyle)
			}
			if f.timeStyle != "" {
				_ = r.Set("timeStyle", f.timeStyle)
			}
			return r
		}
		for _, p := range []struct{ k, v string }{{"weekday", f.weekday}, {"year", f.year}, {"month", f.month},
			{"day", f.day}, {"hour", f.hour}, {"minute", f.minute}, {"second", f.second}, {"timeZoneName", f.tzName}} {
			if p.v != "" {
				_ = r.Set(p.k, p.v)
			}
		}
		return r
	}))
	_ = o.SetSymbol(goja.SymToStringTag, "Intl.DateTimeFormat")
	return o
}
