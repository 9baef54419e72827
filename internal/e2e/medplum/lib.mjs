// Helpers shared by the interop scripts: configuration from the environment
// (set by medplum_interop_test.go), a MedplumClient whose fetch records what
// crossed the wire, and a runner that reports every check and exits non-zero
// when any failed. Nothing here prints tokens or request bodies.
//
// The @medplum/core line under test is the installed package named by
// MEDPLUM_CORE_PACKAGE ("@medplum/core" is the 5.x line, "medplum-core-4" an
// npm alias of the 4.x line); the scripts take the client's exports from
// here so that the same checks run against either line.
import { readFileSync } from 'node:fs';

const corePackage = process.env.MEDPLUM_CORE_PACKAGE || '@medplum/core';
const core = await import(corePackage);
export const { MedplumClient, OperationOutcomeError, ContentType, Hl7Message, ClientStorage, MemoryStorage } = core;

/** coreVersion is the installed version of the @medplum/core line under test. */
export const coreVersion = JSON.parse(
  readFileSync(new URL(`./node_modules/${corePackage}/package.json`, import.meta.url), 'utf8')
).version;

// Refuse to run on another line or Node than the test asked for, so that a
// wrong install cannot pass for the line it replaced.
for (const [name, got] of [
  ['EXPECT_CORE_VERSION', coreVersion],
  ['EXPECT_NODE_VERSION', process.versions.node],
]) {
  const want = process.env[name];
  if (want && want !== got) {
    console.log(`FAIL - ${name}: want ${want}, running ${got}`);
    process.exit(1);
  }
}
console.log(`# @medplum/core ${coreVersion} on Node ${process.versions.node}`);

/** env returns a required environment variable. */
export function env(name) {
  const value = process.env[name];
  if (!value) {
    throw new Error(`environment variable ${name} is not set`);
  }
  return value;
}

/** identifier splits "system|value" into the Identifier executeBot takes. */
export function identifier(systemAndValue) {
  const i = systemAndValue.indexOf('|');
  return { system: systemAndValue.slice(0, i), value: systemAndValue.slice(i + 1) };
}

/**
 * newClient builds a MedplumClient for the gateway, as an application would,
 * with a fetch that records each exchange so checks can look at the wire
 * (the client turns many server answers into the same generic error), and an
 * in-memory storage the caller can reach.
 */
export function newClient(clientId) {
  const calls = [];
  const recordingFetch = async (url, init = {}) => {
    const response = await fetch(url, init);
    const headers = init.headers ?? {};
    calls.push({
      method: init.method ?? 'GET',
      url: new URL(String(url)),
      status: response.status,
      requestContentType: headers['Content-Type'],
      accept: headers['Accept'],
      contentType: response.headers.get('content-type') ?? '',
    });
    return response;
  };
  // The client keeps its login in this storage, where a check can put a
  // token the server will reject, as a revoked one would be.
  const storage = new ClientStorage(new MemoryStorage());
  const medplum = new MedplumClient({ baseUrl: env('FHIRGATE_URL'), clientId, fetch: recordingFetch, storage });
  return { medplum, calls, storage };
}

/** exchanged returns a client signed in through exchangeExternalAccessToken. */
export async function exchanged(clientId) {
  const client = newClient(clientId);
  await client.medplum.exchangeExternalAccessToken(env('IDP_TOKEN'));
  client.calls.length = 0;
  return client;
}

/** wire describes recorded calls for a failure message. */
export function wire(calls) {
  return calls.map((c) => `${c.method} ${c.url.pathname}${c.url.search} -> ${c.status} (${c.contentType})`).join('; ');
}

/** describe renders an error, with the OperationOutcome the client built. */
export function describe(err) {
  if (err instanceof OperationOutcomeError) {
    let s = `OperationOutcomeError ${JSON.stringify(err.outcome)}`;
    if (err.cause) {
      s += ` caused by ${describe(err.cause)}`;
    }
    return s;
  }
  return err?.stack ?? String(err);
}

/**
 * run performs named checks in order, printing "ok - name" or
 * "FAIL - name: why" for each, and sets a non-zero exit code when any failed.
 */
export async function run(checks) {
  let failed = 0;
  for (const [name, check] of checks) {
    try {
      await check();
      console.log(`ok - ${name}`);
    } catch (err) {
      failed++;
      console.log(`FAIL - ${name}: ${describe(err)}`);
    }
  }
  console.log(`${checks.length - failed} of ${checks.length} checks passed`);
  if (failed > 0) {
    process.exitCode = 1;
  }
}
