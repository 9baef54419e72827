// Written the way Medplum's docs write bots: value imports from
// @medplum/core, types from @medplum/fhirtypes.
import { BotEvent, MedplumClient, createReference, getReferenceString } from '@medplum/core';
import { Observation, Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<{ patientId: string }>): Promise<Observation> {
  const patient = await medplum.readResource('Patient', event.input.patientId);
  console.log('read', getReferenceString(patient));
  return medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'heart rate' },
    subject: createReference(patient as Patient),
    valueQuantity: { value: 72, unit: 'beats/min' },
  });
}
