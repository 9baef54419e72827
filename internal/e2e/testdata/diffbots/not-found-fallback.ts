// Caught not-found: reads a Patient that may not exist, tells a 404 apart from other errors with
// isNotFound on normalizeOperationOutcome(err), logs normalizeErrorString, and creates the placeholder the workflow needs.
import { BotEvent, MedplumClient, isNotFound, normalizeErrorString, normalizeOperationOutcome } from '@medplum/core';
import { Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<{ id: string; family: string }>): Promise<any> {
  try {
    const patient = await medplum.readResource('Patient', event.input.id);
    return { found: patient.id };
  } catch (err) {
    if (!isNotFound(normalizeOperationOutcome(err))) {
      throw err;
    }
    console.log(`Patient/${event.input.id}: ${normalizeErrorString(err)}`);
  }
  const created = await medplum.createResource<Patient>({
    resourceType: 'Patient',
    active: false,
    name: [{ family: event.input.family, text: 'placeholder' }],
    identifier: [{ system: 'https://hospital.example.org/legacy-id', value: event.input.id }],
  });
  return { created: created.id };
}
