// Outbound webhook signed with a secret: posts a lab-result event to the URL in
// event.secrets.WEBHOOK_URL with fetch, signed with createHmac('sha256', WEBHOOK_SECRET) from the
// Node 'crypto' module, as the receiver (Stripe/GitHub style) checks it.
import { BotEvent, MedplumClient, getReferenceString } from '@medplum/core';
import { Observation } from '@medplum/fhirtypes';
import { createHmac } from 'crypto';

export async function handler(medplum: MedplumClient, event: BotEvent<Observation>): Promise<any> {
  const url = event.secrets['WEBHOOK_URL'].valueString as string;
  const secret = event.secrets['WEBHOOK_SECRET'].valueString as string;
  const payload = JSON.stringify({
    type: 'lab-result.final',
    subject: event.input.subject?.reference,
    observation: getReferenceString(event.input),
    code: event.input.code?.coding?.[0]?.code,
    value: event.input.valueQuantity?.value,
  });
  const signature = 'sha256=' + createHmac('sha256', secret).update(payload).digest('hex');
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'X-Signature': signature },
    body: payload,
  });
  console.log(`webhook answered ${response.status}`);
  return { status: response.status, body: await response.json() };
}
