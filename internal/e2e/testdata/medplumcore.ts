import {
  BotEvent,
  LOINC,
  MedplumClient,
  OperationOutcomeError,
  SNOMED,
  evalFhirPath,
  isNotFound,
  normalizeErrorString,
} from '@medplum/core';
import { Condition } from '@medplum/fhirtypes';

// Uses @medplum/core as Medplum's own example bots do: code systems, FHIRPath, a caught
// not-found, a thrown outcome, and email.
export async function handler(medplum: MedplumClient, event: BotEvent<any>): Promise<any> {
  const input = event.input;
  if (input.what === 'throw') {
    throw new OperationOutcomeError({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'required', diagnostics: 'Missing required parameter(s): member-name' }],
    });
  }
  if (input.what === 'token') {
    // Hands its token to the test through a search it can see at the backend, then waits for the
    // test to use it while the run lasts.
    const token = medplum.getAccessToken();
    await medplum.search('Patient', { 'run-token': token as string });
    await new Promise((resolve) => setTimeout(resolve, 3000));
    return { same: token === medplum.getAccessToken() };
  }
  if (input.what === 'urls') {
    return [medplum.fhirUrl('Patient', '1').toString(), medplum.fhirSearchUrl('Patient', { name: 'x' }).toString(), medplum.getBaseUrl()];
  }
  if (input.what === 'email') {
    return medplum.sendEmail({ from: input.from, to: 'Ann <ann@example.com>', subject: 'Your result', text: `LOINC ${LOINC}` });
  }
  let caught: unknown[] = [];
  try {
    await medplum.readResource('Patient', 'missing');
  } catch (err: any) {
    caught = [isNotFound(err.outcome), normalizeErrorString(err)];
  }
  const condition = await medplum.createResource<Condition>({
    resourceType: 'Condition',
    code: { coding: [{ system: SNOMED, code: '44054006' }] },
    subject: { reference: 'Patient/1' },
  });
  return {
    loinc: LOINC,
    system: condition.code?.coding?.[0]?.system,
    family: evalFhirPath('Patient.name.family', { resourceType: 'Patient', name: [{ family: 'Lee' }] }),
    caught,
  };
}
