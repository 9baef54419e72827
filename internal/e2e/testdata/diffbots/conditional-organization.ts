// Conditional create: registers the referring practice with createResourceIfNoneExist by NPI
// twice; the second call finds the first one's Organization (If-None-Exist) instead of
// creating a duplicate.
import { BotEvent, MedplumClient } from '@medplum/core';
import { Organization } from '@medplum/fhirtypes';

const NPI = 'http://hl7.org/fhir/sid/us-npi';

export async function handler(medplum: MedplumClient, event: BotEvent<{ npi: string; name: string }>): Promise<any> {
  const org: Organization = {
    resourceType: 'Organization',
    name: event.input.name,
    identifier: [{ system: NPI, value: event.input.npi }],
    active: true,
  };
  const first = await medplum.createResourceIfNoneExist(org, `identifier=${NPI}|${event.input.npi}`);
  const second = await medplum.createResourceIfNoneExist(org, `identifier=${NPI}|${event.input.npi}`);
  console.log(`practice ${first.id}, again ${second.id}`);
  return { first: first.id, second: second.id, same: first.id === second.id };
}
