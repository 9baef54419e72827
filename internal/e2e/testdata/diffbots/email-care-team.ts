// Email: tells the care team about a new critical result with medplum.sendEmail (Medplum's
// /email/v1/send), the patient's name formatted with formatHumanName.
import { BotEvent, MedplumClient, formatHumanName } from '@medplum/core';
import { HumanName, Observation, Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<Observation>): Promise<any> {
  const observation = event.input;
  const patient = await medplum.readReference<Patient>(observation.subject as any);
  const name = formatHumanName(patient.name?.[0] as HumanName);
  const value = `${observation.valueQuantity?.value} ${observation.valueQuantity?.unit}`;
  await medplum.sendEmail({
    to: 'care-team@example.org',
    subject: `Critical result for ${name}`,
    text: `${observation.code?.text}: ${value}. Please review today.`,
  });
  console.log(`emailed the care team about ${name}`);
  return { notified: 'care-team@example.org', patient: name };
}
