// A number as the result: counts a patient's final Observations with searchResources and answers
// the count, which Medplum sends as its decimal text.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<{ patient: string }>): Promise<number> {
  const observations = await medplum.searchResources('Observation', { subject: event.input.patient, _count: 100 });
  const final = observations.filter((o) => o.status === 'final');
  console.log(`${final.length} of ${observations.length} observations are final`);
  return final.length;
}
