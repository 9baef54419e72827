// Calls other bots with medplum.executeBot, as Medplum bots do.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<{ mode: string }>): Promise<any> {
  if (event.input.mode === 'self') {
    return medplum.executeBot({ system: 'https://example.com/bots', value: 'caller' }, { mode: 'self' }, 'application/json');
  }
  const echoed = await medplum.executeBot({ system: 'https://example.com/bots', value: 'echo' }, { hello: 'from caller' }, 'application/json');
  return { echoed };
}
