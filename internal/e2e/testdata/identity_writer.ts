import { BotEvent, MedplumClient } from '@medplum/core';

// The bot identity tests' bot: it records an Observation about Patient/p2,
// which a caller confined to Patient/p1 may not write, and answers with its
// id (an HL7 message gets the AA built for it).
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const o = await medplum.createResource({
    resourceType: 'Observation',
    status: 'final',
    code: { text: 'heart rate' },
    subject: { reference: 'Patient/p2' },
  });
  if (event.contentType === 'x-application/hl7-v2+er7') {
    return undefined;
  }
  return { created: o.id, requester: event.requester?.reference };
}
