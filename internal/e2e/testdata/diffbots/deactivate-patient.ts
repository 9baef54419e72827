// A bot with no result: marks a Patient inactive with readResource + updateResource (a merge
// clean-up job) and returns nothing, which Medplum answers with its "All OK" OperationOutcome.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<{ id: string; reason: string }>): Promise<void> {
  const patient = await medplum.readResource('Patient', event.input.id);
  await medplum.updateResource({
    ...patient,
    active: false,
    extension: [{ url: 'https://example.org/fhir/StructureDefinition/deactivation-reason', valueString: event.input.reason }],
  });
  console.log(`deactivated Patient/${patient.id}`);
}
