package botrunner

import (
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// numberFormat is a resolved Intl.NumberFormat (en-US): decimal, percent or currency, standard
// notation, half-expand rounding to fraction or significant digits.
type numberFormat struct {
	locale, style, currency, currencyDisplay, useGrouping, signDisplay string

	minInt, minFrac, maxFrac int
	minSig, maxSig           int // 0 when rounding to fraction digits
}

const nfClass = "Intl.NumberFormat"

var currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)

// currencySymbols are ICU's en-US symbols (the wide one, then the narrow one when it differs);
// another valid code is shown as itself.
var currencySymbols = map[string][2]string{
	"USD": {"$", ""}, "EUR": {"€", ""}, "GBP": {"£", ""}, "JPY": {"¥", ""}, "INR": {"₹", ""},
	"CAD": {"CA$", "$"}, "AUD": {"A$", "$"}, "MXN": {"MX$", "$"}, "NZD": {"NZ$", "$"},
	"HKD": {"HK$", "$"}, "TWD": {"NT$", "$"}, "CNY": {"CN¥", "¥"}, "BRL": {"R$", ""},
	"KRW": {"₩", ""}, "ILS": {"₪", ""}, "VND": {"₫", ""}, "PHP": {"₱", ""},
}

// currencyDigits are ISO 4217's minor units where they are not 2.
var currencyDigits = map[string]int{
	"JPY": 0, "KRW": 0, "VND": 0, "CLP": 0, "ISK": 0, "PYG": 0, "UGX": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "KWD": 3, "OMR": 3, "JOD": 3, "TND": 3, "LYD": 3,
}

func (x *execution) newNumberFormat(locales, options goja.Value) *numberFormat {
	f := &numberFormat{locale: x.intlLocale(locales)}
	o := x.intlOptions(options)
	x.optString(o, nfClass, "localeMatcher", []string{"lookup", "best fit"}, nil)
	x.optString(o, nfClass, "numberingSystem", nil, []string{"latn"})
	f.style = x.optString(o, nfClass, "style", []string{"decimal", "percent", "currency", "unit"}, []string{"decimal", "percent", "currency"})
	if f.style == "" {
		f.style = "decimal"
	}
	if c := x.optString(o, nfClass, "currency", nil, nil); c != "" {
		if !currencyCode.MatchString(c) {
			panic(x.newError("RangeError", "Invalid currency code : "+truncate(c, 20)))
		}
		f.currency = strings.ToUpper(c)
	}
	f.currencyDisplay = x.optString(o, nfClass, "currencyDisplay", []string{"code", "symbol", "narrowSymbol", "name"}, []string{"code", "symbol", "narrowSymbol"})
	if f.currencyDisplay == "" {
		f.currencyDisplay = "symbol"
	}
	x.optString(o, nfClass, "currencySign", []string{"standard", "accounting"}, []string{"standard"})
	x.optString(o, nfClass, "notation", []string{"standard", "scientific", "engineering", "compact"}, []string{"standard"})
	x.optString(o, nfClass, "roundingMode", []string{"ceil", "floor", "expand", "trunc", "halfCeil", "halfFloor", "halfExpand", "halfTrunc", "halfEven"}, []string{"halfExpand"})
	x.optString(o, nfClass, "roundingPriority", []string{"auto", "morePrecision", "lessPrecision"}, []string{"auto"})
	x.optString(o, nfClass, "trailingZeroDisplay", []string{"auto", "stripIfInteger"}, []string{"auto"})
	if inc := x.optInt(o, "roundingIncrement", 1, 5000); inc > 1 {
		panic(x.intlUnsupported(nfClass + " option roundingIncrement"))
	}
	f.signDisplay = x.optString(o, nfClass, "signDisplay", []string{"auto", "never", "always", "exceptZero", "negative"}, nil)
	if f.signDisplay == "" {
		f.signDisplay = "auto"
	}
	f.useGrouping = "auto"
	if o != nil {
		if g := o.Get("useGrouping"); g != nil && !goja.IsUndefined(g) {
			switch s := g.String(); {
			case goja.IsString(g) && (s == "always" || s == "auto" || s == "min2"):
				f.useGrouping = s
			case goja.IsString(g) && (s == "true" || s == "false"):
				// ECMA-402 reads the strings "true" and "false" as the default
			case goja.IsString(g) && s != "":
				panic(x.newError("RangeError", "Value "+truncate(s, 40)+" out of range for Intl.NumberFormat options property useGrouping"))
			case !g.ToBoolean():
				f.useGrouping = "false"
			}
		}
	}
	if f.style == "currency" && f.currency == "" {
		panic(x.rt.NewTypeError("Currency code is required with currency style."))
	}

	minInt := x.optInt(o, "minimumIntegerDigits", 1, 21)
	f.minInt = int(max(minInt, 1))
	mnsd, mxsd := x.optInt(o, "minimumSignificantDigits", 1, 21), x.optInt(o, "maximumSignificantDigits", 1, 21)
	mnfd, mxfd := x.optInt(o, "minimumFractionDigits", 0, 100), x.optInt(o, "maximumFractionDigits", 0, 100)
	if mnsd >= 0 || mxsd >= 0 {
		f.minSig, f.maxSig = 1, 21
		if mnsd >= 0 {
			f.minSig = int(mnsd)
		}
		if mxsd >= 0 {
			f.maxSig = int(mxsd)
		}
		if f.minSig > f.maxSig {
			panic(x.newError("RangeError", "maximumSignificantDigits value is out of range."))
		}
		return f
	}
	defMin, defMax := 0, 3
	switch f.style {
	case "percent":
		defMax = 0
	case "currency":
		d, ok := currencyDigits[f.currency]
		if !ok {
			d = 2
		}
		defMin, defMax = d, d
	}
	switch {
	case mnfd < 0 && mxfd < 0:
		f.minFrac, f.maxFrac = defMin, defMax
	case mnfd < 0:
		f.minFrac, f.maxFrac = min(defMin, int(mxfd)), int(mxfd)
	case mxfd < 0:
		f.minFrac, f.maxFrac = int(mnfd), max(defMax, int(mnfd))
	default:
		if mnfd > mxfd {
			panic(x.newError("RangeError", "maximumFractionDigits value is out of range."))
		}
		f.minFrac, f.maxFrac = int(mnfd), int(mxfd)
	}
	return f
}

// decimal is a non-negative decimal number: value = 0.digits × 10^point.
type decimal struct {
	digits []byte // no leading zeros; empty for zero
	point  int    // where the decimal point is, counted from the left of digits
}

// toDecimal is the shortest decimal that reads back as v (what ICU formats), |v| finite.
func toDecimal(v float64) decimal {
	s := strconv.FormatFloat(math.Abs(v), 'e', -1, 64) // d.ddde±x
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	digits := []byte(strings.Replace(mant, ".", "", 1))
	d := decimal{digits: digits, point: e + 1}
	d.trim()
	return d
}

func (d *decimal) trim() {
	for len(d.digits) > 0 && d.digits[0] == '0' {
		d.digits = d.digits[1:]
		d.point--
	}
	for len(d.digits) > 0 && d.digits[len(d.digits)-1] == '0' {
		d.digits = d.digits[:len(d.digits)-1]
	}
	if len(d.digits) == 0 {
		d.point = 0
	}
}

// round keeps n digits (counted from the left of digits), half away from zero.
func (d *decimal) round(n int) {
	if n >= len(d.digits) {
		return
	}
	if n < 0 {
		d.digits, d.point = nil, 0
		return
	}
	up := d.digits[n] >= '5'
	d.digits = append([]byte(nil), d.digits[:n]...)
	if up {
		i := n - 1
		for ; i >= 0; i-- {
			if d.digits[i] < '9' {
				d.digits[i]++
				break
			}
			d.digits[i] = '0'
		}
		if i < 0 {
			d.digits = append([]byte{'1'}, d.digits...)
			d.point++
		}
	}
	d.trim()
}

// intFrac is d's integer and fraction digits.
func (d decimal) intFrac() (string, string) {
	var in, fr strings.Builder
	for i := 0; i < d.point; i++ {
		if i < len(d.digits) {
			in.WriteByte(d.digits[i])
		} else {
			in.WriteByte('0')
		}
	}
	for i := d.point; i < len(d.digits); i++ {
		if i < 0 {
			fr.WriteByte('0')
		} else {
			fr.WriteByte(d.digits[i])
		}
	}
	return in.String(), fr.String()
}

// parts formats n as ICU's en-US pattern for f.
func (f *numberFormat) parts(n float64) []intlPart {
	var ps []intlPart
	add := func(typ, s string) { ps = append(ps, intlPart{typ, s}) }
	negative := math.Signbit(n) && !math.IsNaN(n)

	var body []intlPart
	zero := false
	switch {
	case math.IsNaN(n):
		body = []intlPart{{"nan", "NaN"}}
	case math.IsInf(n, 0):
		body = []intlPart{{"infinity", "∞"}}
	default:
		d := toDecimal(n)
		if f.style == "percent" && len(d.digits) > 0 {
			d.point += 2
		}
		if f.maxSig > 0 {
			d.round(f.maxSig)
		} else {
			d.round(d.point + f.maxFrac)
		}
		zero = len(d.digits) == 0
		in, fr := d.intFrac()
		minFrac := f.minFrac
		if f.maxSig > 0 {
			// The first minSig significant digits are shown, from the first of digits (of
			// zero, the zero before the point is the first).
			need := f.minSig - d.point
			if zero {
				need = f.minSig - 1
			}
			minFrac = max(need, 0)
		}
		if in == "" {
			in = "0"
		}
		for len(fr) < minFrac {
			fr += "0"
		}
		for len(in) < f.minInt {
			in = "0" + in
		}
		grouping := f.useGrouping != "false" && (f.useGrouping != "min2" || len(in) >= 5)
		if grouping && len(in) > 3 {
			first := len(in) % 3
			if first == 0 {
				first = 3
			}
			body = append(body, intlPart{"integer", in[:first]})
			for i := first; i < len(in); i += 3 {
				body = append(body, intlPart{"group", ","}, intlPart{"integer", in[i : i+3]})
			}
		} else {
			body = append(body, intlPart{"integer", in})
		}
		if fr != "" {
			body = append(body, intlPart{"decimal", "."}, intlPart{"fraction", fr})
		}
	}

	switch f.signDisplay {
	case "auto":
		if negative {
			add("minusSign", "-")
		}
	case "always":
		if negative {
			add("minusSign", "-")
		} else {
			add("plusSign", "+")
		}
	case "exceptZero":
		switch {
		case zero || math.IsNaN(n):
		case negative:
			add("minusSign", "-")
		default:
			add("plusSign", "+")
		}
	case "negative":
		if negative && !zero {
			add("minusSign", "-")
		}
	}
	if f.style == "currency" {
		sym := f.currency
		if s, ok := currencySymbols[f.currency]; ok && f.currencyDisplay != "code" {
			sym = s[0]
			if f.currencyDisplay == "narrowSymbol" && s[1] != "" {
				sym = s[1]
			}
		}
		add("currency", sym)
		if last := sym[len(sym)-1]; 'A' <= last && last <= 'Z' && !math.IsNaN(n) && !math.IsInf(n, 0) {
			add("literal", "\u00a0")
		}
	}
	ps = append(ps, body...)
	if f.style == "percent" {
		add("percentSign", "%")
	}
	return ps
}

// object is the Intl.NumberFormat instance of f.
func (f *numberFormat) object(x *execution) *goja.Object {
	rt := x.rt
	o := rt.NewObject()
	_ = o.Set("format", x.fn("format", func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(joinParts(f.parts(c.Argument(0).ToFloat())))
	}))
	_ = o.Set("formatToParts", x.fn("formatToParts", func(c goja.FunctionCall) goja.Value {
		return x.partsArray(f.parts(c.Argument(0).ToFloat()))
	}))
	_ = o.Set("resolvedOptions", x.fn("resolvedOptions", func(goja.FunctionCall) goja.Value {
		r := rt.NewObject()
		_ = r.Set("locale", f.locale)
		_ = r.Set("numberingSystem", "latn")
		_ = r.Set("style", f.style)
		if f.style == "currency" {
			_ = r.Set("currency", f.currency)
			_ = r.Set("currencyDisplay", f.currencyDisplay)
			_ = r.Set("currencySign", "standard")
		}
		_ = r.Set("minimumIntegerDigits", f.minInt)
		if f.maxSig > 0 {
			_ = r.Set("minimumSignificantDigits", f.minSig)
			_ = r.Set("maximumSignificantDigits", f.maxSig)
		} else {
			_ = r.Set("minimumFractionDigits", f.minFrac)
			_ = r.Set("maximumFractionDigits", f.maxFrac)
		}
		if f.useGrouping == "false" {
			_ = r.Set("useGrouping", false)
		} else {
			_ = r.Set("useGrouping", f.useGrouping)
		}
		_ = r.Set("notation", "standard")
		_ = r.Set("signDisplay", f.signDisplay)
		_ = r.Set("roundingIncrement", 1)
		_ = r.Set("roundingMode", "halfExpand")
		_ = r.Set("roundingPriority", "auto")
		_ = r.Set("trailingZeroDisplay", "auto")
		return r
	}))
	_ = o.SetSymbol(goja.SymToStringTag, "Intl.NumberFormat")
	return o
}
