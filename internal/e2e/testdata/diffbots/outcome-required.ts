// Thrown outcomes: a bot validating its input throws an OperationOutcomeError with its own
// OperationOutcome (code 'required'), which Medplum answers as a 400 carrying that outcome.
import { BotEvent, MedplumClient, OperationOutcomeError } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<Record<string, string>>): Promise<any> {
  const missing = ['member-name', 'member-id'].filter((p) => !event.input[p]);
  if (missing.length > 0) {
    console.log(`rejecting: missing ${missing.join(', ')}`);
    throw new OperationOutcomeError({
      resourceType: 'OperationOutcome',
      issue: [{ severity: 'error', code: 'required', diagnostics: `Missing required parameter(s): ${missing.join(', ')}` }],
    });
  }
  return { ok: true };
}
