// HL7 v2 intake, as Medplum's agent delivers it: the Hl7Message input (MSH, PID), an upsert of the
// Patient by MRN with searchOne + createResource/updateResource, and the ACK from buildAck().
import { BotEvent, Hl7Message, MedplumClient } from '@medplum/core';
import { Patient } from '@medplum/fhirtypes';

const MRN_SYSTEM = 'https://hospital.example.org/mrn';
const GENDERS: Record<string, Patient['gender']> = { M: 'male', F: 'female', O: 'other' };

export async function handler(medplum: MedplumClient, event: BotEvent<Hl7Message>): Promise<Hl7Message> {
  const msg = event.input;
  const messageType = msg.getSegment('MSH')?.getField(9)?.toString();
  const pid = msg.getSegment('PID');
  if (!pid) {
    throw new Error('The message has no PID segment');
  }
  const mrn = pid.getComponent(3, 1);
  const family = pid.getComponent(5, 1);
  const given = pid.getComponent(5, 2);
  const dob = pid.getField(7).toString();
  const existing = await medplum.searchOne('Patient', { identifier: `${MRN_SYSTEM}|${mrn}` });
  const patient: Patient = {
    ...existing,
    resourceType: 'Patient',
    identifier: [{ system: MRN_SYSTEM, value: mrn }],
    name: [{ use: 'official', family, given: [given] }],
    birthDate: `${dob.slice(0, 4)}-${dob.slice(4, 6)}-${dob.slice(6, 8)}`,
    gender: GENDERS[pid.getField(8).toString()] ?? 'unknown',
  };
  const saved = existing ? await medplum.updateResource(patient) : await medplum.createResource(patient);
  console.log(`${messageType}: ${existing ? 'updated' : 'registered'} Patient/${saved.id} (${family}, ${given})`);
  return msg.buildAck();
}
