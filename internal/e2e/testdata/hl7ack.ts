// Written the way Medplum's docs write HL7 bots: value imports from
// @medplum/core, an async handler that reads the patient's name (PID-5) and
// answers the sender with an ACK built from the message.
import { BotEvent, Hl7Message, MedplumClient } from '@medplum/core';

export async function handler(_medplum: MedplumClient, event: BotEvent): Promise<any> {
  const message = event.input;
  if (!(message instanceof Hl7Message)) {
    throw new Error('Expected an HL7 message, got ' + event.contentType);
  }
  const name = message.getSegment('PID')?.getField(5);
  const family = name?.getComponent(1) ?? '';
  const given = name?.getComponent(2) ?? '';
  if (!family) {
    return message.buildAck({ ackCode: 'AE' });
  }
  const ack = message.buildAck({ ackCode: 'AA' });
  // MSA-3 (text message) tells the sender whom the message was about.
  ack.getSegment('MSA')?.setField(3, `Received ${family} ${given}`.trim());
  return ack;
}
