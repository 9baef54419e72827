import { BotEvent, MedplumClient } from '@medplum/core';

interface Echo {
  input: unknown;
}

// Answers with its input; logs something so the audit trail has console output.
export async function handler(_medplum: MedplumClient, event: BotEvent): Promise<any> {
  console.log('content type', event.contentType);
  const e: Echo = { input: event.input };
  return e.input;
}
