// Timers: setTimeout ordering by delay, clearTimeout, setInterval stopped by clearInterval, and
// queueMicrotask before any timer, as a debounce/poll loop in a bot relies on.
import { BotEvent, MedplumClient } from '@medplum/core';

export async function handler(medplum: MedplumClient, event: BotEvent): Promise<string[]> {
  const order: string[] = [];
  await new Promise<void>((resolve) => {
    setTimeout(() => order.push('timeout 200'), 200);
    setTimeout(() => order.push('timeout 5'), 5);
    const cancelled = setTimeout(() => order.push('cancelled'), 20);
    clearTimeout(cancelled);
    let ticks = 0;
    const interval = setInterval(() => {
      ticks++;
      order.push(`tick ${ticks}`);
      if (ticks === 3) {
        clearInterval(interval);
        setTimeout(resolve, 300);
      }
    }, 20);
    queueMicrotask(() => order.push('microtask'));
    order.push('sync');
  });
  for (const step of order) {
    console.log(step);
  }
  return order;
}
