// Concurrent fetch: looks up each RxNorm code of a medication list at an outside service with
// Promise.all, and records the result as MedicationStatements.
import { BotEvent, MedplumClient } from '@medplum/core';
import { MedicationStatement } from '@medplum/fhirtypes';

const RXNORM = 'http://www.nlm.nih.gov/research/umls/rxnorm';

export async function handler(medplum: MedplumClient, event: BotEvent<{ patient: string; rxcuis: string[] }>): Promise<any> {
  const base = event.secrets['API_BASE'].valueString;
  const drugs = await Promise.all(
    event.input.rxcuis.map(async (code) => {
      const response = await fetch(`${base}/rxnorm/${code}`);
      if (!response.ok) {
        throw new Error(`RxNorm ${code}: ${response.status}`);
      }
      return (await response.json()) as { rxcui: string; name: string };
    })
  );
  for (const drug of drugs) {
    await medplum.createResource<MedicationStatement>({
      resourceType: 'MedicationStatement',
      status: 'active',
      subject: { reference: event.input.patient },
      medicationCodeableConcept: { coding: [{ system: RXNORM, code: drug.rxcui, display: drug.name }] },
    });
  }
  console.log(`recorded ${drugs.length} medications`);
  return drugs.map((d) => d.name);
}
