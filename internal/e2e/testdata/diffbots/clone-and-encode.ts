// structuredClone, atob and btoa: a bot builds a Basic authorization value with btoa, decodes a
// base64 field with atob, and deep-copies a resource (with a Date and a Map) before editing it.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<{ user: string; password: string; encoded: string }>): Promise<any> {
  const basic = 'Basic ' + btoa(`${event.input.user}:${event.input.password}`);
  const decoded = atob(event.input.encoded);
  const original = { resourceType: 'Patient', name: [{ family: 'Lopez' }], when: new Date('2026-01-02T03:04:05Z'), tags: new Map([['a', 1]]) };
  const copy = structuredClone(original);
  copy.name[0].family = 'Changed';
  console.log(`decoded ${decoded.length} characters`);
  return {
    basic,
    decoded,
    originalFamily: original.name[0].family,
    copyFamily: copy.name[0].family,
    // Object.prototype.toString rather than instanceof: it holds across realms (a Node vm
    // context's globals come from the host's).
    dateKept: Object.prototype.toString.call(copy.when) === '[object Date]' && copy.when.toISOString(),
    mapKept: Object.prototype.toString.call(copy.tags) === '[object Map]' && copy.tags.get('a'),
    independent: copy.when !== original.when && copy.tags !== original.tags,
  };
}
