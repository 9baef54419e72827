// MedplumClient.executeBot with Prefer: respond-async and
// pollStatusOnAccepted: the gateway answers 202 with a Content-Location, and
// the client polls the AsyncJob there until the run has ended.
import assert from 'node:assert/strict';
import { ContentType, env, exchanged, run, wire } from './lib.mjs';

const id = env('ECHO_BOT_ID');
const { medplum, calls } = await exchanged(env('CLIENT_ID'));

await run([
  [
    'executeBot with respond-async resolves to the completed AsyncJob',
    async () => {
      calls.length = 0;
      const job = await medplum.executeBot(id, { async: 'yes' }, ContentType.JSON, {
        headers: { Prefer: 'respond-async' },
        pollStatusOnAccepted: true,
        pollStatusPeriod: 100,
      });
      assert.equal(job?.resourceType, 'AsyncJob', JSON.stringify(job));
      assert.equal(job.status, 'completed', JSON.stringify(job));
      const body = job.output.parameter.find((p) => p.name === 'responseBody');
      assert.deepEqual(JSON.parse(body.valueString), { async: 'yes' });
      assert.equal(calls[0].status, 202, wire(calls));
      assert.ok(
        calls.slice(1).every((c) => c.method === 'GET' && /\/fhir\/R4\/job\/[^/]+\/status$/.test(c.url.pathname)),
        wire(calls)
      );
      assert.equal(calls.at(-1).status, 200, wire(calls));
    },
  ],
]);
