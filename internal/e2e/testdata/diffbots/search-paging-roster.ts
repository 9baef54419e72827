// Search and write with paging: reads every Patient five at a time with _count/_offset until the
// Bundle has no next link, and writes the roster as one List resource.
import { BotEvent, MedplumClient, formatHumanName } from '@medplum/core';
import { HumanName, List } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const entries: List['entry'] = [];
  let pages = 0;
  for (let offset = 0; ; offset += 5) {
    const bundle = await medplum.search('Patient', { _count: 5, _offset: offset });
    pages++;
    for (const entry of bundle.entry ?? []) {
      const patient = entry.resource!;
      entries.push({ item: { reference: `Patient/${patient.id}`, display: formatHumanName(patient.name?.[0] as HumanName) } });
    }
    if (!bundle.link?.some((l) => l.relation === 'next')) {
      break;
    }
  }
  const list = await medplum.createResource<List>({
    resourceType: 'List',
    status: 'current',
    mode: 'snapshot',
    title: 'Registered patients',
    entry: entries,
  });
  console.log(`${entries.length} patients in ${pages} pages`);
  return { list: list.id, pages, count: entries.length, first: entries[0]?.item.display };
}
