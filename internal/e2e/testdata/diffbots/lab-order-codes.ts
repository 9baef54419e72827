// Coding helpers: a ServiceRequest's LOINC code read with getCodeBySystem, a SNOMED CT code added
// with setCodeBySystem, an extension read with getExtensionValue, the order stored, and
// formatCodeableConcept for the answer.
import {
  BotEvent,
  LOINC,
  MedplumClient,
  SNOMED,
  formatCodeableConcept,
  getCodeBySystem,
  getExtensionValue,
  setCodeBySystem,
} from '@medplum/core';
import { ServiceRequest } from '@medplum/fhirtypes';

const PRIORITY_EXT = 'https://example.org/fhir/StructureDefinition/lab-priority-reason';

export async function handler(medplum: MedplumClient, event: BotEvent<ServiceRequest>): Promise<any> {
  const order = event.input;
  const loinc = getCodeBySystem(order.code ?? {}, LOINC);
  if (loinc === '24331-1') {
    setCodeBySystem(order.code ?? {}, SNOMED, '16254007');
  }
  const reason = getExtensionValue(order, PRIORITY_EXT) as string | undefined;
  const saved = await medplum.createResource(order);
  console.log(`order ${saved.id}: ${formatCodeableConcept(saved.code)} (${reason ?? 'routine'})`);
  return { id: saved.id, loinc, codes: saved.code?.coding?.map((c) => `${c.system}|${c.code}`), reason };
}
