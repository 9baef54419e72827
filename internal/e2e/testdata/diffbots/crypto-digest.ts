// Web Crypto and node:crypto: a content hash of the input with crypto.subtle.digest and with
// createHash (they must agree), a random id with crypto.randomUUID, random bytes with
// getRandomValues, and a constant-time compare with timingSafeEqual.
import { BotEvent, MedplumClient } from '@medplum/core';
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';

export async function handler(medplum: MedplumClient, event: BotEvent<string>): Promise<any> {
  const bytes = new TextEncoder().encode(event.input);
  const digest = Buffer.from(await crypto.subtle.digest('SHA-256', bytes)).toString('hex');
  const hashed = createHash('sha256').update(event.input, 'utf8').digest('hex');
  const random = crypto.getRandomValues(new Uint8Array(16));
  const id = crypto.randomUUID();
  const nodeId = randomUUID();
  console.log(`sha256 ${digest}`);
  return {
    digest,
    agree: digest === hashed,
    constantTimeEqual: timingSafeEqual(Buffer.from(digest, 'hex'), Buffer.from(hashed, 'hex')),
    randomBytes: random.length,
    uuidV4: /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(id) && id !== nodeId,
    md5: createHash('md5').update('abc').digest('base64'),
  };
}
