import { BotEvent, MedplumClient } from '@medplum/core';

// Logs what a Subscription delivered, so the AuditEvent shows it.
export async function handler(_medplum: MedplumClient, event: BotEvent): Promise<any> {
  console.log('DELIVERED ' + JSON.stringify({ input: event.input, headers: event.headers, contentType: event.contentType }));
  return true;
}
