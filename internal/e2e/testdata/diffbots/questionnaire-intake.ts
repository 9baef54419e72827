// Questionnaire to resources: a QuestionnaireResponse (application/fhir+json) read with
// getQuestionnaireAnswers becomes a Patient, a Condition coded in SNOMED CT and a smoking-status
// Observation coded in LOINC, linked to each other with createReference.
import { BotEvent, LOINC, MedplumClient, SNOMED, createReference, getQuestionnaireAnswers } from '@medplum/core';
import { Condition, Observation, Patient, QuestionnaireResponse } from '@medplum/fhirtypes';

export async function handler(medplum: MedplumClient, event: BotEvent<QuestionnaireResponse>): Promise<any> {
  const answers = getQuestionnaireAnswers(event.input);
  const patient = await medplum.createResource<Patient>({
    resourceType: 'Patient',
    name: [{ given: [answers['first-name']?.valueString ?? ''], family: answers['last-name']?.valueString }],
    birthDate: answers['dob']?.valueDate,
  });
  const problem = answers['problem']?.valueCoding;
  const condition = await medplum.createResource<Condition>({
    resourceType: 'Condition',
    subject: createReference(patient),
    clinicalStatus: { coding: [{ system: 'http://terminology.hl7.org/CodeSystem/condition-clinical', code: 'active' }] },
    code: { coding: [{ system: SNOMED, code: problem?.code, display: problem?.display }] },
  });
  const smoker = answers['smoker']?.valueBoolean;
  const observation = await medplum.createResource<Observation>({
    resourceType: 'Observation',
    status: 'final',
    subject: createReference(patient),
    code: { coding: [{ system: LOINC, code: '72166-2', display: 'Tobacco smoking status' }] },
    valueCodeableConcept: {
      coding: [
        smoker
          ? { system: SNOMED, code: '77176002', display: 'Smoker' }
          : { system: SNOMED, code: '8392000', display: 'Non-smoker' },
      ],
    },
  });
  console.log(`intake for ${patient.name?.[0]?.family}: ${Object.keys(answers).length} answers`);
  return { patient: createReference(patient), condition: condition.code, observation: observation.valueCodeableConcept };
}
