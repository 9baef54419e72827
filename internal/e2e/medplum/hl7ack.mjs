// A Medplum-style TypeScript bot (testdata/hl7ack.ts) run through
// MedplumClient.executeBot with an HL7 v2 message: the client gets the ACK
// as text, and Medplum's own parser reads it.
import assert from 'node:assert/strict';
import { ContentType, Hl7Message, env, exchanged, identifier, run, wire } from './lib.mjs';

const adt = (pid) =>
  'MSH|^~\\&|EPIC|HOSP|LAB|HOSP|20240101120000||ADT^A01|MSG00042|P|2.5.1\r' + pid + '\rPV1|1|I|ICU^101^A';

const { medplum, calls } = await exchanged(env('CLIENT_ID'));
const targets = [
  ['by id', env('HL7ACK_BOT_ID')],
  ['by identifier', identifier(env('HL7ACK_BOT_IDENTIFIER'))],
];

function ackCheck(bot, pid, code, text) {
  return async () => {
    calls.length = 0;
    const reply = await medplum.executeBot(bot, adt(pid), ContentType.HL7_V2);
    assert.equal(typeof reply, 'string', `reply is ${typeof reply}; wire: ${wire(calls)}`);
    assert.match(calls[0].contentType, /^x-application\/hl7-v2\+er7/);
    const ack = Hl7Message.parse(reply);
    const msh = ack.getSegment('MSH');
    const msa = ack.getSegment('MSA');
    assert.equal(msh?.getField(9)?.getComponent(1), 'ACK', reply);
    assert.equal(msh?.getField(3)?.toString(), 'LAB', 'the ACK goes back to the sender: ' + reply);
    assert.equal(msh?.getField(5)?.toString(), 'EPIC', reply);
    assert.equal(msa?.getField(1)?.toString(), code, reply);
    assert.equal(msa?.getField(2)?.toString(), 'MSG00042', reply);
    if (text) {
      assert.equal(msa?.getField(3)?.toString(), text, reply);
    }
  };
}

const checks = [];
for (const [name, bot] of targets) {
  checks.push([
    `hl7ack ${name} acknowledges with the patient's name`,
    ackCheck(bot, 'PID|1||12345^^^HOSP^MR||DOE^JOHN^Q||19800101|M', 'AA', 'Received DOE JOHN'),
  ]);
  checks.push([`hl7ack ${name} answers AE without PID-5`, ackCheck(bot, 'PID|1||12345^^^HOSP^MR', 'AE')]);
}
await run(checks);
