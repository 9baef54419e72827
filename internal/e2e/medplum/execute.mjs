// MedplumClient.executeBot against fhirgate's echo bot, by id and by
// {system, value} identifier, with each content type $execute accepts. The
// client parses JSON answers and returns every other answer as text, so this
// checks both what the bot received and what the client made of the reply.
import assert from 'node:assert/strict';
import { ContentType, env, exchanged, identifier, run, wire } from './lib.mjs';

const hl7 =
  'MSH|^~\\&|EPIC|HOSP|LAB|HOSP|20240101120000||ADT^A01|MSG00001|P|2.5.1\r' +
  'PID|1||12345^^^HOSP^MR||DOE^JOHN^Q||19800101|M\r' +
  'PV1|1|I|ICU^101^A';

const patient = {
  resourceType: 'Patient',
  identifier: [{ system: 'https://example.com/mrn', value: '12345' }],
  name: [{ family: 'Doe', given: ['John', 'Q'] }],
  birthDate: '1980-01-01',
};

const cases = [
  { name: 'text/plain', contentType: ContentType.TEXT, body: 'hello bot', want: 'hello bot', reply: /^text\/plain/ },
  {
    name: 'application/json',
    contentType: ContentType.JSON,
    body: { a: 1, b: [true, null], c: { d: 'é' } },
    want: { a: 1, b: [true, null], c: { d: 'é' } },
    reply: /^application\/json/,
  },
  {
    name: 'application/x-www-form-urlencoded',
    contentType: ContentType.FORM_URL_ENCODED,
    body: 'a=1&b=2',
    want: { a: '1', b: '2' },
    reply: /^application\/json/,
  },
  { name: 'application/fhir+json', contentType: ContentType.FHIR_JSON, body: patient, want: patient, reply: /^application\/fhir\+json/ },
  { name: 'x-application/hl7-v2+er7', contentType: ContentType.HL7_V2, body: hl7, want: hl7, reply: /^x-application\/hl7-v2\+er7/ },
];

const id = env('ECHO_BOT_ID');
const ident = identifier(env('ECHO_BOT_IDENTIFIER'));
const targets = [
  { name: 'by id', bot: id, path: `/fhir/R4/Bot/${id}/$execute`, search: '' },
  {
    name: 'by identifier',
    bot: ident,
    path: '/fhir/R4/Bot/$execute',
    search: '?' + new URLSearchParams({ identifier: `${ident.system}|${ident.value}` }),
  },
];

const { medplum, calls } = await exchanged(env('CLIENT_ID'));

const checks = [];
for (const target of targets) {
  for (const c of cases) {
    checks.push([
      `executeBot ${target.name} with ${c.name}`,
      async () => {
        calls.length = 0;
        const result = await medplum.executeBot(target.bot, c.body, c.contentType);
        assert.equal(calls.length, 1, wire(calls));
        const [call] = calls;
        assert.equal(`${call.method} ${call.url.pathname}${call.url.search} ${call.status}`, `POST ${target.path}${target.search} 200`);
        assert.equal(call.requestContentType, c.contentType);
        assert.match(call.contentType, c.reply, 'reply content type');
        if (typeof c.want === 'string') {
          assert.equal(typeof result, 'string', 'the client returns text for non-JSON replies');
        }
        assert.deepEqual(result, c.want);
      },
    ]);
  }
}
await run(checks);
