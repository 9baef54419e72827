// HL7 v2 lab results: an ORU^R01's OBX segments become Observations coded with the LOINC and UCUM
// constants of @medplum/core, the OBX-14 time read with parseHl7DateTime, the subject found by MRN.
import { BotEvent, Hl7Message, LOINC, MedplumClient, UCUM, parseHl7DateTime } from '@medplum/core';
import { Observation } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<Hl7Message>): Promise<Hl7Message> {
  const msg = event.input;
  const mrn = msg.getSegment('PID')?.getComponent(3, 1);
  const patient = await medplum.searchOne('Patient', { identifier: `https://hospital.example.org/mrn|${mrn}` });
  if (!patient) {
    return msg.buildAck({ ackCode: 'AE' });
  }
  for (const obx of msg.getAllSegments('OBX')) {
    const observation: Observation = {
      resourceType: 'Observation',
      status: obx.getField(11).toString() === 'F' ? 'final' : 'preliminary',
      subject: { reference: `Patient/${patient.id}` },
      code: { coding: [{ system: LOINC, code: obx.getComponent(3, 1), display: obx.getComponent(3, 2) }] },
      valueQuantity: {
        value: Number(obx.getField(5).toString()),
        unit: obx.getComponent(6, 1),
        system: UCUM,
        code: obx.getComponent(6, 1),
      },
      effectiveDateTime: parseHl7DateTime(obx.getField(14).toString()),
    };
    const created = await medplum.createResource(observation);
    console.log(`OBX ${obx.getComponent(3, 1)} -> Observation/${created.id}`);
  }
  return msg.buildAck();
}
