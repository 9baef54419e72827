// The MLLP tests' bot, written as Medplum's docs write HL7 bots: it answers
// every message with an ACK built from it, says whom the message was about
// in MSA-3, and throws on a patient named THROW.
import { BotEvent, Hl7Message, MedplumClient } from '@medplum/core';

export async function handler(_medplum: MedplumClient, event: BotEvent<Hl7Message>): Promise<Hl7Message> {
  const message = event.input;
  const family = message.getSegment('PID')?.getField(5)?.getComponent(1) ?? '';
  if (family === 'THROW') {
    throw new Error('patient THROW refused by the bot');
  }
  console.log('message from', event.requester?.reference);
  const ack = message.buildAck({ ackCode: 'AA' });
  ack.getSegment('MSA')?.setField(3, `Received ${family}`.trim());
  return ack;
}
