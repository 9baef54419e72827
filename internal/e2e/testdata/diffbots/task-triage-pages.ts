// Paging with searchResourcePages: walks the requested Tasks two per page with the async
// generator of MedplumClient, then accepts each with patchResource (JSON Patch).
import { BotEvent, MedplumClient } from '@medplum/core';
import { Task } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const tasks: Task[] = [];
  let pages = 0;
  for await (const page of medplum.searchResourcePages('Task', { status: 'requested', _count: 2 })) {
    pages++;
    tasks.push(...page);
  }
  for (const task of tasks) {
    await medplum.patchResource('Task', task.id as string, [
      { op: 'replace', path: '/status', value: 'accepted' },
      { op: 'add', path: '/businessStatus', value: { text: 'Triaged by bot' } },
    ]);
  }
  console.log(`accepted ${tasks.length} tasks from ${pages} pages`);
  return { pages, accepted: tasks.map((t) => t.id) };
}
