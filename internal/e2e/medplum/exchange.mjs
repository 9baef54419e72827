// MedplumClient.exchangeExternalAccessToken against fhirgate: the RFC 8693
// exchange at /oauth2/token, then /auth/me, resolving to the profile, for a
// client that matches users by email and one that matches by subject.
import assert from 'node:assert/strict';
import { ContentType, env, newClient, run, wire } from './lib.mjs';

const [profileType, profileId] = env('EXPECT_PROFILE').split('/');
const project = env('EXPECT_PROJECT');

function exchangeCheck(clientId) {
  return async () => {
    const { medplum, calls } = newClient(clientId);
    const profile = await medplum.exchangeExternalAccessToken(env('IDP_TOKEN'));

    assert.ok(profile, `exchange resolved to ${profile}; wire: ${wire(calls)}`);
    assert.equal(profile.resourceType, profileType);
    assert.equal(profile.id, profileId);
    assert.deepEqual(medplum.getProfile(), profile);
    assert.equal(medplum.isAuthenticated(), true);
    assert.equal(medplum.getProject()?.id, project, 'getProject() from /auth/me');
    assert.equal(medplum.getProjectMembership()?.resourceType, 'ProjectMembership');
    assert.equal(medplum.isProjectAdmin(), true, 'isProjectAdmin() from membership.admin');

    // The stored login is built from the token response's Reference objects.
    const login = medplum.getActiveLogin();
    assert.equal(login?.profile?.reference, `${profileType}/${profileId}`, 'token response profile');
    assert.equal(login?.project?.reference, `Project/${project}`, 'token response project');
    assert.ok(login?.refreshToken, 'default scope "openid offline" gives a refresh token');

    // Exactly the two requests Medplum makes, in order.
    assert.equal(calls.length, 2, wire(calls));
    const [token, me] = calls;
    assert.equal(`${token.method} ${token.url.pathname} ${token.status}`, 'POST /oauth2/token 200', wire(calls));
    assert.equal(token.requestContentType, ContentType.FORM_URL_ENCODED);
    assert.match(token.contentType, /json/);
    assert.equal(`${me.method} ${me.url.pathname} ${me.status}`, 'GET /auth/me 200', wire(calls));
    assert.match(me.contentType, /json/);

    // The exchanged token works for FHIR requests through the gateway.
    calls.length = 0;
    const patient = await medplum.readResource('Patient', 'exchange-check');
    assert.equal(patient.resourceType, 'Patient');
    assert.equal(patient.id, 'exchange-check');
    assert.equal(calls[0]?.url.pathname, '/fhir/R4/Patient/exchange-check', wire(calls));
  };
}

await run([
  ['exchange through the email-matching client resolves to the profile', exchangeCheck(env('CLIENT_ID'))],
  ['exchange through the use-subject client resolves to the profile', exchangeCheck(env('SUBJECT_CLIENT_ID'))],
]);
