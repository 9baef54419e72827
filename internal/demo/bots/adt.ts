// The demo's ADT bot: takes admissions, transfers and discharges over MLLP
// (or $execute with an HL7 body) and acknowledges them. Written exactly as
// Medplum's documentation writes HL7 bots.
import { BotEvent, Hl7Message, MedplumClient } from '@medplum/core';

export async function handler(_medplum: MedplumClient, event: BotEvent<Hl7Message>): Promise<Hl7Message> {
  const message = event.input;
  const type = message.getSegment('MSH')?.getField(9)?.getComponent(1);
  if (type !== 'ADT') {
    throw new Error(`expected an ADT message, got ${type}`);
  }
  const pid = message.getSegment('PID');
  console.log('ADT', message.getSegment('EVN')?.getField(1)?.toString(), 'for', pid?.getField(5)?.getComponent(1));
  return message.buildAck();
}
