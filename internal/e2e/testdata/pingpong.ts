import { BotEvent, MedplumClient } from '@medplum/core';

// The loop tests' bot: a Patient makes it write an Observation, anything
// else a Patient, so two Subscriptions on Patient and Observation run it
// back and forth until the chain bound stops them.
export async function handler(medplum: MedplumClient, event: BotEvent<any>): Promise<any> {
  const written =
    event.input.resourceType === 'Patient'
      ? await medplum.createResource({ resourceType: 'Observation', status: 'final', code: { text: 'pong' } })
      : await medplum.createResource({ resourceType: 'Patient', name: [{ family: 'Ping' }] });
  console.log('WROTE ' + written.resourceType + '/' + written.id);
  return true;
}
