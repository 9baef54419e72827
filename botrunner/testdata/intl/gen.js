// Generates node22.json, the Intl cases the sandbox must format exactly as Node does:
//   internal/e2e/medplum/node_modules/node-22/bin/node botrunner/testdata/intl/gen.js > botrunner/testdata/intl/node22.json
// Each case is {fn, locale, options, value, want}; fn names the call (see intl_test.go).
const run = {
  dtf: (l, o, v) => new Intl.DateTimeFormat(l, o).format(v),
  dtfParts: (l, o, v) => JSON.stringify(new Intl.DateTimeFormat(l, o).formatToParts(v)),
  toLocaleString: (l, o, v) => new Date(v).toLocaleString(l, o),
  toLocaleDateString: (l, o, v) => new Date(v).toLocaleDateString(l, o),
  toLocaleTimeString: (l, o, v) => new Date(v).toLocaleTimeString(l, o),
  nf: (l, o, v) => new Intl.NumberFormat(l, o).format(v),
  nfParts: (l, o, v) => JSON.stringify(new Intl.NumberFormat(l, o).formatToParts(v)),
  numberToLocaleString: (l, o, v) => v.toLocaleString(l, o),
};
const cases = [];
const add = (fn, locale, options, value) => cases.push({ fn, locale, options, value, want: run[fn](locale, options, value) });

const dates = [Date.UTC(2026, 10, 20, 17, 5, 9), Date.UTC(2026, 0, 5, 0, 7, 3), Date.UTC(2025, 6, 4, 12, 30, 0), Date.UTC(1999, 11, 31, 23, 59, 59, 999)];
const zones = ['UTC', 'America/New_York', 'America/Los_Angeles', 'Europe/Paris', 'Asia/Kolkata', 'Australia/Sydney', 'America/St_Johns'];
const dateSets = [{}, { day: 1 }, { month: 1 }, { year: 1 }, { month: 1, day: 1 }, { year: 1, month: 1 }, { year: 1, month: 1, day: 1 },
  { weekday: 1 }, { weekday: 1, month: 1, day: 1 }, { weekday: 1, year: 1, month: 1, day: 1 }];
const timeSets = [{}, { hour: 1 }, { hour: 1, minute: 1 }, { hour: 1, minute: 1, second: 1 }, { minute: 1, second: 1 }];
const widths = { weekday: ['long', 'short', 'narrow'], year: ['numeric', '2-digit'], month: ['numeric', '2-digit', 'long', 'short', 'narrow'],
  day: ['numeric', '2-digit'], hour: ['numeric', '2-digit'], minute: ['numeric', '2-digit'], second: ['numeric', '2-digit'] };
let i = 0;
for (const ds of dateSets) for (const ts of timeSets) {
  const keys = [...Object.keys(ds), ...Object.keys(ts)];
  if (keys.length === 0) continue;
  // Every width of every field, in turn, with the others at a width that varies with i.
  for (const k of keys) for (const w of widths[k]) {
    const o = {};
    for (const k2 of keys) o[k2] = k2 === k ? w : widths[k2][(i++) % widths[k2].length];
    o.timeZone = zones[i % zones.length];
    if (i % 5 === 0) o.hour12 = false;
    add('dtf', 'en-US', o, dates[i % dates.length]);
  }
}
for (const dateStyle of [undefined, 'full', 'long', 'medium', 'short'])
  for (const timeStyle of [undefined, 'full', 'long', 'medium', 'short'])
    for (const timeZone of ['UTC', 'America/Chicago', 'America/Denver', 'Pacific/Honolulu', 'America/Anchorage']) {
      if (!dateStyle && !timeStyle) continue;
      for (const d of dates) add('dtf', 'en-US', { dateStyle, timeStyle, timeZone }, d);
    }
for (const tz of zones) for (const timeZoneName of ['short', 'long']) {
  if (timeZoneName === 'long' && !['UTC', 'America/New_York', 'America/Los_Angeles'].includes(tz)) continue;
  for (const d of dates) {
    add('dtf', 'en-US', { timeZone: tz, timeZoneName, hour: 'numeric', minute: '2-digit' }, d);
    add('dtf', 'en-US', { timeZone: tz, timeZoneName }, d);
  }
}
for (const l of [undefined, 'en-US', 'en', ['en-US']]) for (const d of dates) {
  add('toLocaleString', l, { timeZone: 'UTC' }, d);
  add('toLocaleDateString', l, { timeZone: 'America/New_York' }, d);
  add('toLocaleTimeString', l, { timeZone: 'Europe/Paris' }, d);
}
for (const d of dates) {
  add('toLocaleDateString', 'en-US', { weekday: 'long', month: 'long', day: 'numeric', timeZone: 'UTC' }, d);
  add('toLocaleDateString', 'en-US', { hour: 'numeric', timeZone: 'UTC' }, d);
  add('toLocaleTimeString', 'en-US', { weekday: 'long', timeZone: 'UTC' }, d);
  add('toLocaleTimeString', 'en-US', { hour: '2-digit', minute: '2-digit', timeZone: 'UTC' }, d);
  add('toLocaleString', 'en-US', { hour12: false, timeZone: 'UTC' }, d);
  add('toLocaleString', 'en-US', { hourCycle: 'h23', timeZone: 'America/new_york' }, d);
  add('toLocaleString', 'en-US', { month: 'short', timeZone: 'utc' }, d);
  add('toLocaleDateString', 'en-US', { dateStyle: 'medium', timeZone: 'UTC' }, d);
  add('toLocaleTimeString', 'en-US', { timeStyle: 'short', timeZone: 'UTC' }, d);
  add('dtfParts', 'en-US', { dateStyle: 'full', timeStyle: 'long', timeZone: 'America/New_York' }, d);
  add('dtfParts', 'en-US', { weekday: 'short', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric', timeZone: 'Asia/Kolkata' }, d);
}

const numbers = [0, -0, 1, -1, 0.5, 1.005, 2.5, -2.5, 0.125, 12.3456, 1234.5, -1234.567, 1234567.891, 999.9999, 1e21, 1e-7, 0.000123456, 123456789012, NaN, Infinity, -Infinity];
const numberOptions = [
  undefined, {}, { maximumFractionDigits: 0 }, { maximumFractionDigits: 2 }, { minimumFractionDigits: 2 }, { minimumFractionDigits: 1, maximumFractionDigits: 4 },
  { minimumIntegerDigits: 3 }, { useGrouping: false }, { useGrouping: 'min2' }, { useGrouping: 'always' },
  { maximumSignificantDigits: 3 }, { minimumSignificantDigits: 4 }, { minimumSignificantDigits: 2, maximumSignificantDigits: 5 },
  { signDisplay: 'always' }, { signDisplay: 'never' }, { signDisplay: 'exceptZero' }, { signDisplay: 'negative' },
  { style: 'percent' }, { style: 'percent', minimumFractionDigits: 1 }, { style: 'percent', maximumFractionDigits: 2 },
  { style: 'currency', currency: 'USD' }, { style: 'currency', currency: 'usd', minimumFractionDigits: 0 },
  { style: 'currency', currency: 'USD', maximumFractionDigits: 0 }, { style: 'currency', currency: 'USD', currencyDisplay: 'code' },
  { style: 'currency', currency: 'EUR' }, { style: 'currency', currency: 'GBP' }, { style: 'currency', currency: 'JPY' },
  { style: 'currency', currency: 'CAD' }, { style: 'currency', currency: 'CAD', currencyDisplay: 'narrowSymbol' },
  { style: 'currency', currency: 'CHF' }, { style: 'currency', currency: 'INR' }, { style: 'currency', currency: 'AUD' },
  { style: 'currency', currency: 'MXN' }, { style: 'currency', currency: 'CNY' }, { style: 'currency', currency: 'BRL' },
  { style: 'currency', currency: 'KRW' }, { style: 'currency', currency: 'KWD' }, { style: 'currency', currency: 'XYZ' },
  { style: 'currency', currency: 'NZD', currencyDisplay: 'narrowSymbol' }, { style: 'currency', currency: 'HKD' },
  { style: 'currency', currency: 'USD', signDisplay: 'always' }, { style: 'currency', currency: 'CHF', signDisplay: 'exceptZero' },
];
for (const o of numberOptions) for (const n of numbers) add('nf', 'en-US', o, n);
for (const n of numbers) { add('numberToLocaleString', undefined, undefined, n); add('numberToLocaleString', 'en', { style: 'currency', currency: 'USD' }, n); }
add('nfParts', 'en-US', { style: 'currency', currency: 'USD' }, -1234.5);
add('nfParts', 'en-US', { style: 'percent', signDisplay: 'always' }, 0.256);
add('nfParts', 'en-US', { style: 'currency', currency: 'CHF' }, 1234567.5);
add('nfParts', 'en-US', {}, NaN);
// JSON cannot hold NaN, -0 or the infinities: values travel as strings.
const enc = (v) => (typeof v === 'number' ? (Object.is(v, -0) ? '-0' : String(v)) : v);
console.log('[\n' + cases.map((c) => JSON.stringify({ ...c, value: enc(c.value) })).join(',\n') + '\n]');
