// The demo's echo bot: answers with what it was sent, in the same shape.
// Written exactly as Medplum's documentation writes bots.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(_medplum: MedplumClient, event: BotEvent): Promise<any> {
  console.log('echo bot called with', event.contentType);
  return event.input;
}
