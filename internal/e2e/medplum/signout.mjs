// A machine signs in with MedplumClient.startClientLogin (client_credentials),
// and signOut() ends a sign-in for real: it resolves, and the tokens it held
// are refused afterwards, the access token with 401 and the refresh token at
// the token endpoint.
import assert from 'node:assert/strict';
import { env, exchanged, newClient, run, wire } from './lib.mjs';

const base = env('FHIRGATE_URL').replace(/\/$/, '');

async function fhirStatus(accessToken) {
  const res = await fetch(`${base}/fhir/R4/Patient/p1`, { headers: { Authorization: `Bearer ${accessToken}` } });
  return res.status;
}

async function refreshAnswer(clientId, refreshToken) {
  const res = await fetch(`${base}/oauth2/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId }),
  });
  return { status: res.status, body: await res.json() };
}

await run([
  [
    'startClientLogin signs the machine in as its own ClientApplication',
    async () => {
      const { medplum, calls } = newClient(env('MACHINE_CLIENT_ID'));
      const profile = await medplum.startClientLogin(env('MACHINE_CLIENT_ID'), env('MACHINE_CLIENT_SECRET'));
      assert.equal(profile?.resourceType, 'ClientApplication', `profile ${JSON.stringify(profile)}; wire: ${wire(calls)}`);
      assert.equal(profile.id, env('MACHINE_CLIENT_ID'));
      const login = medplum.getActiveLogin();
      assert.equal(login?.profile?.reference, `ClientApplication/${env('MACHINE_CLIENT_ID')}`);
      assert.equal(login?.project?.reference, `Project/${env('EXPECT_PROJECT')}`);
      assert.equal(login?.refreshToken, undefined, 'no refresh token for client_credentials');
      assert.equal(medplum.isProjectAdmin(), true, 'the client membership is an admin');
      const patient = await medplum.readResource('Patient', 'p1');
      assert.equal(patient.name?.[0]?.family, 'FromBackend');

      const access = medplum.getAccessToken();
      await medplum.signOut();
      assert.equal(medplum.getAccessToken(), undefined, 'signOut() cleared the client');
      assert.equal(await fhirStatus(access), 401, 'the access token is refused after signOut()');
    },
  ],
  [
    'signOut() after a token exchange revokes the access and the refresh token',
    async () => {
      const { medplum } = await exchanged(env('CLIENT_ID'));
      const access = medplum.getAccessToken();
      const refresh = medplum.getActiveLogin()?.refreshToken;
      assert.ok(refresh, 'the exchange gave a refresh token');
      assert.equal(await fhirStatus(access), 200, 'the access token works before signOut()');
      await medplum.signOut();
      assert.equal(await fhirStatus(access), 401, 'the access token is refused after signOut()');
      const answer = await refreshAnswer(env('CLIENT_ID'), refresh);
      assert.equal(answer.status, 400, `refresh after signOut(): ${JSON.stringify(answer)}`);
      assert.equal(answer.body.error, 'invalid_grant');
    },
  ],
]);
