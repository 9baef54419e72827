// Form input: an application/x-www-form-urlencoded web form (as a public intake page posts it)
// becomes a Patient with a telecom and address; the bot answers a plain-text confirmation.
import { BotEvent, MedplumClient, formatHumanName } from '@medplum/core';
import { HumanName, Patient } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<Record<string, string>>): Promise<string> {
  const form = event.input;
  const name: HumanName = { given: [form.given], family: form.family };
  const patient = await medplum.createResource<Patient>({
    resourceType: 'Patient',
    name: [name],
    birthDate: form.dob,
    telecom: [{ system: 'phone', value: form.phone, use: 'mobile' }],
    address: [{ line: [form.street], city: form.city, postalCode: form.zip }],
  });
  console.log(`registered ${formatHumanName(name)} from the web form`);
  return `Thank you, ${formatHumanName(name)}. Your registration number is ${patient.id}.`;
}
