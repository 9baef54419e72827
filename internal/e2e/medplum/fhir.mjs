// FHIR reads and writes through the gateway with MedplumClient's own
// methods: createResource (POST), updateResource (PUT) and readResource
// (GET) reach the backend under /fhir/R4 and the client gets the backend's
// answer (the test backend echoes a created resource back with an id).
// medplum_interop_test.go checks the identity the backend received.
import assert from 'node:assert/strict';
import { env, exchanged, run, wire } from './lib.mjs';

const { medplum, calls } = await exchanged(env('CLIENT_ID'));
const tag = env('WRITE_TAG'); // tells this run's writes apart at the backend
const patientId = tag;

await run([
  [
    'createResource posts the resource and returns the created one',
    async () => {
      calls.length = 0;
      const created = await medplum.createResource({
        resourceType: 'Observation',
        status: 'final',
        code: { text: tag },
        subject: { reference: `Patient/${patientId}` },
      });
      assert.equal(calls.length, 1, wire(calls));
      assert.equal(`${calls[0].method} ${calls[0].url.pathname} ${calls[0].status}`, 'POST /fhir/R4/Observation 201');
      assert.equal(calls[0].requestContentType, 'application/fhir+json');
      assert.equal(created.resourceType, 'Observation');
      assert.equal(created.id, 'new-1', 'the id the backend gave');
      assert.equal(created.code?.text, tag);
    },
  ],
  [
    'updateResource puts the resource and returns the backend answer',
    async () => {
      calls.length = 0;
      const updated = await medplum.updateResource({
        resourceType: 'Patient',
        id: patientId,
        name: [{ family: tag }],
      });
      assert.equal(calls.length, 1, wire(calls));
      assert.equal(`${calls[0].method} ${calls[0].url.pathname} ${calls[0].status}`, `PUT /fhir/R4/Patient/${patientId} 200`);
      assert.equal(updated.resourceType, 'Patient');
      assert.equal(updated.id, patientId);
    },
  ],
  [
    'readResource reads from the backend',
    async () => {
      calls.length = 0;
      const patient = await medplum.readResource('Patient', 'read-check', { cache: 'no-cache' });
      assert.equal(calls.length, 1, wire(calls));
      assert.equal(`${calls[0].method} ${calls[0].url.pathname} ${calls[0].status}`, 'GET /fhir/R4/Patient/read-check 200');
      assert.equal(patient.id, 'read-check');
      assert.equal(patient.name?.[0]?.family, 'FromBackend');
    },
  ],
]);
