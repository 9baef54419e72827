// Timers and retry with backoff: calls an outside service that fails with 503 twice, waiting
// 25, 50, 100 ms between attempts with setTimeout, as bots calling flaky partner APIs do.
import { BotEvent, MedplumClient } from '@medplum/core';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export async function handler(medplum: MedplumClient, event: BotEvent): Promise<any> {
  const url = `${event.secrets['API_BASE'].valueString}/flaky`;
  let delay = 25;
  for (let attempt = 1; attempt <= 5; attempt++) {
    const response = await fetch(url);
    if (response.ok) {
      console.log(`attempt ${attempt}: ok`);
      return { attempts: attempt, result: await response.json() };
    }
    console.log(`attempt ${attempt}: ${response.status}, retrying in ${delay} ms`);
    await sleep(delay);
    delay *= 2;
  }
  throw new Error('the service did not recover after 5 attempts');
}
