// Buffer and base64: a plain-text note becomes a DocumentReference whose attachment holds the
// note as base64 (Buffer.from(...).toString('base64')), with its size from Buffer.byteLength; the
// bot reads it back and decodes it, and answers the hex of the first bytes.
import { BotEvent, MedplumClient } from '@medplum/core';
import { DocumentReference } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<string>): Promise<any> {
  const note = event.input;
  const data = Buffer.from(note, 'utf8').toString('base64');
  const doc = await medplum.createResource<DocumentReference>({
    resourceType: 'DocumentReference',
    status: 'current',
    subject: { reference: 'Patient/seed-pat-03' },
    description: 'Visit note',
    content: [{ attachment: { contentType: 'text/plain; charset=utf-8', data, size: Buffer.byteLength(note) } }],
  });
  const back = await medplum.readResource('DocumentReference', doc.id as string);
  const bytes = Buffer.from(back.content[0].attachment.data as string, 'base64');
  const same = bytes.equals(Buffer.from(note));
  console.log(`stored ${bytes.length} bytes, round trip ${same ? 'ok' : 'BROKEN'}`);
  return {
    size: bytes.length,
    chars: note.length,
    hexPrefix: bytes.subarray(0, 8).toString('hex'),
    latin1: Buffer.from([0x63, 0x61, 0x66, 0xe9]).toString('latin1'),
    concat: Buffer.concat([Buffer.from('ab'), Buffer.from([0x63])]).toString(),
    isBuffer: Buffer.isBuffer(bytes),
  };
}
