// Asks the backend for each path in event.input.paths and reports, per path, whether the call
// succeeded or how it was rejected; the run itself goes on after a rejection.
import { BotEvent, MedplumClient, OperationOutcomeError } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent<{ paths: string[] }>): Promise<any> {
  const results = [];
  for (const path of event.input.paths) {
    try {
      await medplum.get(path);
      results.push({ path, ok: true });
    } catch (e: any) {
      results.push({
        path,
        ok: false,
        outcomeError: e instanceof OperationOutcomeError,
        code: e.outcome?.issue?.[0]?.code,
        message: e.message,
      });
    }
  }
  return { results };
}
