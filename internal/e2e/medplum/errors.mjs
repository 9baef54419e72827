// How MedplumClient sees fhirgate's refusals: a token exchange the identity
// provider rejects, and an access token whose payload was tampered with
// (fhirgate answers 401; the client refreshes when it can, otherwise clears
// its login and throws).
import assert from 'node:assert/strict';
import { OperationOutcomeError, describe, env, exchanged, newClient, run, wire } from './lib.mjs';

/**
 * tamper flips one character of the token's subject and re-encodes the
 * payload, keeping the original signature: the claims still parse and the
 * expiry is untouched, so the client sends it as it would a valid token.
 */
function tamper(jwt) {
  const [header, payload, signature] = jwt.split('.');
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  const last = claims.sub.slice(-1);
  claims.sub = claims.sub.slice(0, -1) + (last === 'a' ? 'b' : 'a');
  return [header, Buffer.from(JSON.stringify(claims)).toString('base64url'), signature].join('.');
}

/** isUnauthorized matches the error the client throws after a final 401. */
function isUnauthorized(err) {
  assert.ok(err instanceof OperationOutcomeError, `not an OperationOutcomeError: ${err}`);
  assert.equal(err.outcome.id, 'unauthorized', JSON.stringify(err.outcome));
  return true;
}

/**
 * rejectedWith401 runs a request with a tampered token in a client that has
 * no refresh token: the gateway must answer 401 and the client must give up
 * (no refresh, no retry), clear its login and reject.
 */
function rejectedWith401(request, path) {
  return async () => {
    const { medplum, calls } = await exchanged(env('CLIENT_ID'));
    medplum.setAccessToken(tamper(medplum.getAccessToken())); // drops the refresh token
    await assert.rejects(request(medplum), isUnauthorized);
    assert.equal(calls.length, 1, `one request, no refresh: ${wire(calls)}`);
    assert.equal(`${calls[0].url.pathname} ${calls[0].status}`, `${path} 401`, wire(calls));
    assert.equal(medplum.getAccessToken(), undefined, 'the client cleared its login');
  };
}

await run([
  [
    'a rejected exchange rejects with "Failed to fetch tokens"',
    async () => {
      const { medplum, calls } = newClient(env('CLIENT_ID'));
      await assert.rejects(medplum.exchangeExternalAccessToken(env('BAD_IDP_TOKEN')), (err) => {
        assert.ok(err instanceof OperationOutcomeError, `not an OperationOutcomeError: ${err}`);
        // The client parsed the server's JSON error_description: 5.x puts
        // it after the prefix, 4.x keeps it in the cause.
        const description = err.message.startsWith('Failed to fetch tokens: ')
          ? err.message.slice('Failed to fetch tokens: '.length)
          : err.cause?.message;
        assert.match(err.message, /^Failed to fetch tokens(: .+)?$/);
        assert.ok(description, `the server's error_description reached the client: ${describe(err)}`);
        assert.match(description, /identity provider/, 'the description says what failed');
        return true;
      });
      assert.equal(calls.length, 1, `one request, not retried: ${wire(calls)}`);
      assert.equal(calls[0].url.pathname, '/oauth2/token');
      assert.ok(calls[0].status >= 400 && calls[0].status < 500, wire(calls));
      assert.equal(medplum.isAuthenticated(), false);
      assert.equal(medplum.getActiveLogin(), undefined);
    },
  ],
  [
    'a tampered token gives 401 on a FHIR read',
    rejectedWith401((medplum) => medplum.readResource('Patient', 'tampered'), '/fhir/R4/Patient/tampered'),
  ],
  [
    'a tampered token gives 401 on executeBot',
    rejectedWith401(
      (medplum) => medplum.executeBot(env('ECHO_BOT_ID'), 'x', 'text/plain'),
      `/fhir/R4/Bot/${env('ECHO_BOT_ID')}/$execute`
    ),
  ],
  [
    'after a 401 the client refreshes with its refresh token and retries',
    async () => {
      const { medplum, calls, storage } = await exchanged(env('CLIENT_ID'));
      const login = medplum.getActiveLogin();
      const tampered = tamper(login.accessToken);
      // The stored login holds the rejected token too (5.x re-reads it
      // before refreshing, and would otherwise retry with the good one).
      storage.setObject('activeLogin', { ...login, accessToken: tampered });
      medplum.setAccessToken(tampered, login.refreshToken);
      const patient = await medplum.readResource('Patient', 'after-refresh');
      assert.equal(patient.id, 'after-refresh');
      const seen = calls.map((c) => `${c.method} ${c.url.pathname} ${c.status}`);
      assert.deepEqual(seen, [
        'GET /fhir/R4/Patient/after-refresh 401',
        'POST /oauth2/token 200',
        'GET /auth/me 200',
        'GET /fhir/R4/Patient/after-refresh 200',
      ]);
      assert.notEqual(medplum.getAccessToken(), tampered, 'a new access token');
      const rotated = medplum.getActiveLogin()?.refreshToken;
      assert.ok(rotated && rotated !== login.refreshToken, 'the refresh token was rotated');
    },
  ],
]);
