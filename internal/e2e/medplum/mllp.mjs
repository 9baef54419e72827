// Sends HL7 v2 messages to fhirgate's MLLP listener with @medplum/hl7's
// Hl7Client (Node 22) and checks every acknowledgment: the corpus of
// internal/hl7/testdata (AA in original mode; in enhanced mode the CA, and
// the application ACK only when MSH-16 asks), a message the bot throws on
// (AE with an ERR segment), and a resent message (the same ACK, the bot not
// run again). Environment: MLLP_PORT, CORPUS (a directory of .hl7 files).
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Hl7Client, ReturnAckCategory } from '@medplum/hl7';
import { Hl7Message } from '@medplum/core';
import { env, run } from './lib.mjs';

const client = new Hl7Client({ host: '127.0.0.1', port: Number(env('MLLP_PORT')) });
const corpus = env('CORPUS');

function load(file) {
  // The corpus keeps some files with LF or CRLF line ends; on the wire HL7
  // separates segments with CR.
  const text = readFileSync(join(corpus, file), 'utf8').replace(/\r\n|\n/g, '\r').replace(/\r+$/, '');
  return Hl7Message.parse(text);
}

function field(msg, segment, n) {
  return msg.getSegment(segment)?.getField(n)?.toString() ?? '';
}

function expect(cond, why) {
  if (!cond) {
    throw new Error(why);
  }
}

const checks = [];
for (const file of readdirSync(corpus).filter((f) => f.endsWith('.hl7')).sort()) {
  checks.push([`${file} acknowledged`, async () => {
    const msg = load(file);
    // A fresh control id per run: the gateway remembers answers by sender
    // and MSH-10 for duplicates.
    const id = `${file.replace(/[^A-Za-z0-9]/g, '').slice(0, 12)}${Date.now() % 100000000}`;
    msg.getSegment('MSH').setField(10, id);
    const accept = field(msg, 'MSH', 15).toUpperCase();
    const app = field(msg, 'MSH', 16).toUpperCase();
    const enhanced = accept !== '' || app !== '';
    const wantsApp = !enhanced || app === '' || app === 'AL' || app === 'SU';
    const ack = await client.sendAndWait(msg, {
      timeoutMs: 20000,
      returnAck: wantsApp ? ReturnAckCategory.APPLICATION : ReturnAckCategory.FIRST,
    });
    const code = field(ack, 'MSA', 1);
    expect(field(ack, 'MSA', 2) === id, `MSA-2 ${field(ack, 'MSA', 2)}, want ${id}`);
    expect(code === (wantsApp ? 'AA' : 'CA'), `MSA-1 ${code} (MSH-15 ${accept} MSH-16 ${app}): ${ack.toString()}`);
    expect(field(ack, 'MSH', 5) === field(msg, 'MSH', 3), `MSH-5 ${field(ack, 'MSH', 5)} is not the sender`);
    console.log(`# ${file}: ${code}`);
  }]);
}

checks.push(['a bot that throws is answered AE with the error in ERR', async () => {
  const msg = load('adt_a01.hl7');
  msg.getSegment('MSH').setField(10, `THROW${Date.now()}`);
  msg.getSegment('MSH').setField(15, '');
  msg.getSegment('MSH').setField(16, '');
  msg.getSegment('PID').setField(5, 'THROW^ME');
  const ack = await client.sendAndWait(msg, { timeoutMs: 20000 });
  expect(field(ack, 'MSA', 1) === 'AE', `MSA-1 ${field(ack, 'MSA', 1)}: ${ack.toString()}`);
  const err = ack.getSegment('ERR');
  expect(err && err.getField(8).toString().includes('refused by the bot'), `ERR: ${err?.toString()}`);
}]);

checks.push(['a resent message gets the same ACK', async () => {
  const msg = load('adt_a01.hl7');
  msg.getSegment('MSH').setField(10, `DUP${Date.now()}`);
  msg.getSegment('MSH').setField(15, '');
  msg.getSegment('MSH').setField(16, '');
  const first = await client.sendAndWait(msg, { timeoutMs: 20000 });
  const second = await client.sendAndWait(msg, { timeoutMs: 20000 });
  expect(field(first, 'MSA', 1) === 'AA', `first: ${first.toString()}`);
  expect(first.toString() === second.toString(), `different answers:\n${first.toString()}\n${second.toString()}`);
}]);

try {
  await run(checks);
} finally {
  await client.close();
}
