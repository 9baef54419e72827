import { BotEvent, MedplumClient } from '@medplum/core';

// The declared-bot test's scheduled bot: on each tick it reads
// Patient/cron-<its name>, so the backend sees that the tick ran, as whom
// (the identity headers) and with the Bot as event.input.
export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const bot = event.input as { resourceType: string; name: string };
  if (bot.resourceType !== 'Bot' || !event.headers?.['x-fhirgate-cron-tick']) {
    throw new Error('not a cron tick: ' + JSON.stringify(event.input));
  }
  await medplum.readResource('Patient', 'cron-' + bot.name);
  return undefined;
}
