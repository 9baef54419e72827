// How MedplumClient sees the gate's authorization: a token narrowed to
// user/Patient.r reads a Patient, and its create of an Observation rejects
// with a "forbidden" OperationOutcomeError whose message names the missing
// permission, as Medplum's own 403s do.
import assert from 'node:assert/strict';
import { OperationOutcomeError, env, newClient, run, wire } from './lib.mjs';

/** narrowed returns a client holding a token exchanged for scope. */
async function narrowed(scope) {
  const res = await fetch(`${env('FHIRGATE_URL')}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
      client_id: env('CLIENT_ID'),
      subject_token: env('IDP_TOKEN'),
      subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      scope,
    }),
  });
  assert.equal(res.status, 200, await res.clone().text());
  const { access_token: token } = await res.json();
  const client = newClient(env('CLIENT_ID'));
  client.medplum.setAccessToken(token);
  return client;
}

await run([
  [
    'a narrowed token reads what its scope allows',
    async () => {
      const { medplum, calls } = await narrowed('openid user/Patient.r');
      const patient = await medplum.readResource('Patient', 'scoped-1');
      assert.equal(patient.id, 'scoped-1', wire(calls));
    },
  ],
  [
    'a create outside the scope rejects with forbidden naming Observation.c',
    async () => {
      const { medplum, calls } = await narrowed('openid user/Patient.r');
      await assert.rejects(
        medplum.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'scoped' } }),
        (err) => {
          assert.ok(err instanceof OperationOutcomeError, `not an OperationOutcomeError: ${err}`);
          assert.equal(err.outcome.issue?.[0]?.code, 'forbidden', JSON.stringify(err.outcome));
          assert.match(err.message, /Observation\.c/);
          return true;
        },
      );
      assert.equal(calls.length, 1, `one request, no retry: ${wire(calls)}`);
      assert.equal(calls[0].status, 403, wire(calls));
    },
  ],
]);
