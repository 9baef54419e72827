// Terminology in searches: finds the latest height and weight by `${LOINC}|code` token searches,
// computes the BMI and records it as an Observation with a UCUM unit.
import { BotEvent, LOINC, MedplumClient, UCUM } from '@medplum/core';
import { Observation, Reference, Patient } from '@medplum/fhirtypes';

async function latest(medplum: MedplumClient, subject: string, code: string): Promise<Observation | undefined> {
  return medplum.searchOne('Observation', { subject, code: `${LOINC}|${code}`, _sort: '-date' });
}

export async function handler(medplum: MedplumClient, event: BotEvent<{ patient: string }>): Promise<any> {
  const subject = event.input.patient;
  const height = await latest(medplum, subject, '8302-2');
  const weight = await latest(medplum, subject, '29463-7');
  if (!height?.valueQuantity?.value || !weight?.valueQuantity?.value) {
    console.log(`no height or weight for ${subject}`);
    return { bmi: null };
  }
  const meters = height.valueQuantity.value / 100;
  const bmi = Math.round((weight.valueQuantity.value / (meters * meters)) * 10) / 10;
  const created = await medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    subject: { reference: subject } as Reference<Patient>,
    code: { coding: [{ system: LOINC, code: '39156-5', display: 'Body mass index (BMI) [Ratio]' }] },
    valueQuantity: { value: bmi, unit: 'kg/m2', system: UCUM, code: 'kg/m2' },
    derivedFrom: [{ reference: `Observation/${height.id}` }, { reference: `Observation/${weight.id}` }],
  });
  console.log(`BMI ${bmi} kg/m2 for ${subject}`);
  return { bmi, observation: created.id };
}
