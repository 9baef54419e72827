import { MedplumClient } from '@medplum/core';

// Holds its run slot for as long as the backend takes to answer Basic/slow
// (the fair-share suite's backend waits ~3 s), with one call per run, so the
// backend sees how many runs of it are going at once.
export async function handler(medplum: MedplumClient): Promise<any> {
  const r = await medplum.readResource('Basic', 'slow');
  return r.id;
}
