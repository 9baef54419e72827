// Reference and display helpers of @medplum/core on a read Patient: createReference,
// getReferenceString, getDisplayString, formatHumanName with options, formatGivenName,
// formatFamilyName, getIdentifier, calculateAgeString against a fixed date, and isUUID.
import {
  BotEvent,
  MedplumClient,
  calculateAgeString,
  createReference,
  formatFamilyName,
  formatGivenName,
  formatHumanName,
  getDisplayString,
  getIdentifier,
  getReferenceString,
  isUUID,
} from '@medplum/core';
import { HumanName } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<{ id: string }>): Promise<any> {
  const patient = await medplum.readResource('Patient', event.input.id);
  const name = patient.name?.[0] as HumanName;
  const summary = {
    reference: createReference(patient),
    referenceString: getReferenceString(patient),
    display: getDisplayString(patient),
    formal: formatHumanName(name, { prefix: true, use: true }),
    given: formatGivenName(name),
    family: formatFamilyName(name),
    mrn: getIdentifier(patient, 'https://hospital.example.org/mrn'),
    age: calculateAgeString(patient.birthDate as string, '2026-01-01'),
    idIsUUID: isUUID(patient.id as string),
  };
  console.log(`${summary.display}, ${summary.age}`);
  return summary;
}
