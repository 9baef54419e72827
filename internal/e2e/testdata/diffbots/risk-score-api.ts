// A secret API key from event.secrets: calls an outside scoring API with a bearer key and records
// its answer as a RiskAssessment; a refused key is an error naming the status, never the key.
import { BotEvent, MedplumClient, createReference } from '@medplum/core';
import { RiskAssessment } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<{ patient: string }>): Promise<any> {
  const patient = await medplum.readResource('Patient', event.input.patient);
  const base = event.secrets['API_BASE'].valueString;
  const response = await fetch(`${base}/score?patient=${encodeURIComponent(patient.id as string)}`, {
    headers: { Authorization: `Bearer ${event.secrets['API_KEY'].valueString}`, Accept: 'application/json' },
  });
  if (!response.ok) {
    throw new Error(`scoring service answered ${response.status}`);
  }
  const score = (await response.json()) as { risk: number; band: string };
  const assessment = await medplum.createResource<RiskAssessment>({
    resourceType: 'RiskAssessment',
    status: 'final',
    subject: createReference(patient),
    prediction: [{ probabilityDecimal: score.risk, qualitativeRisk: { text: score.band } }],
  });
  console.log(`risk ${score.risk} (${score.band})`);
  return { assessment: assessment.id, risk: score.risk };
}
