// Intl dates in a named time zone: formats an Appointment's start for the clinic in
// America/New_York (the day US daylight saving time starts) with toLocaleDateString,
// toLocaleTimeString and Intl.DateTimeFormat, the copay with Intl.NumberFormat, and writes the
// reminder as a Communication.
import { BotEvent, MedplumClient } from '@medplum/core';
import { Appointment, Communication } from '@medplum/fhirtypes';

const TZ = 'America/New_York';

export async function handler(medplum: MedplumClient, event: BotEvent<{ appointment: string }>): Promise<string> {
  const appointment = await medplum.readResource('Appointment', event.input.appointment);
  const start = new Date(appointment.start as string);
  const day = start.toLocaleDateString('en-US', { timeZone: TZ, weekday: 'long', month: 'long', day: 'numeric' });
  const time = start.toLocaleTimeString('en-US', { timeZone: TZ, hour: 'numeric', minute: '2-digit', timeZoneName: 'short' });
  const short = new Intl.DateTimeFormat('en-US', { timeZone: TZ, dateStyle: 'short', timeStyle: 'short' }).format(start);
  const h24 = start.toLocaleString('en-US', { timeZone: TZ, hour12: false, hour: '2-digit', minute: '2-digit' });
  const copay = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD' }).format(25);
  const text = `Reminder: ${appointment.description} on ${day} at ${time} (${short}, ${h24}). Copay ${copay}.`;
  const patient = (appointment.participant ?? []).find((p) => p.actor?.reference?.startsWith('Patient/'))?.actor;
  await medplum.createResource<Communication>({
    resourceType: 'Communication',
    status: 'completed',
    subject: patient as Communication['subject'],
    about: [{ reference: `Appointment/${appointment.id}` }],
    payload: [{ contentString: text }],
  });
  console.log(text);
  return text;
}
