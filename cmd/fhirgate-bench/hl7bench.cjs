// Medplum side of fhirgate-bench scenario 4: Hl7Message.parse, read every
// component of every repetition of every field, toString(), over the corpus
// files given, for the given milliseconds after a warmup. Prints JSON with
// wall-clock and CPU-time (all of Node's threads) throughput.
'use strict';
const fs = require('fs');
const { Hl7Message } = require('@medplum/core');

const [warmupMs, runMs, ...files] = process.argv.slice(2);
const texts = files.map((f) => fs.readFileSync(f, 'utf8'));
const corpusBytes = files.reduce((n, f) => n + fs.statSync(f).size, 0);

function once() {
  let n = 0;
  for (const text of texts) {
    const msg = Hl7Message.parse(text);
    for (const seg of msg.segments) {
      for (const field of seg.fields) {
        for (const rep of field.components) {
          for (const c of rep) {
            n += c.length;
          }
        }
      }
    }
    n += msg.toString().length;
  }
  return n;
}

function run(ms) {
  let rounds = 0;
  let sink = 0;
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  const end = start + BigInt(ms) * 1000000n;
  let now = start;
  while (now < end) {
    sink += once();
    rounds++;
    now = process.hrtime.bigint();
  }
  const cpu = process.cpuUsage(cpu0);
  return { rounds, seconds: Number(now - start) / 1e9, cpuSeconds: (cpu.user + cpu.system) / 1e6, sink };
}

run(Number(warmupMs));
const r = run(Number(runMs));
if (r.sink === 0) {
  throw new Error('read nothing');
}
const bytes = r.rounds * corpusBytes;
process.stdout.write(JSON.stringify({
  rounds: r.rounds,
  seconds: r.seconds,
  bytes,
  mb_per_s: bytes / r.seconds / 1e6,
  cpu_seconds: r.cpuSeconds,
  mb_per_cpu_s: bytes / r.cpuSeconds / 1e6,
}) + '\n');
