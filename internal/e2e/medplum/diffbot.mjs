// The Node side of the differential bot suite (internal/e2e/diffbots_test.go): runs each bot as
// Medplum's server runs a vmcontext bot (packages/server/src/bots/vmcontext.ts in Medplum 5.x) with
// the real @medplum/core, and answers as Medplum's $execute handler would.
//
// usage: node diffbot.mjs <job.json> <result.json>
//
// job.json: {backend, accessToken, requester, secrets, bots: [{name, bot: {reference, display},
// code (CommonJS, as Medplum's CLI builds it), input (the raw body), contentType, timeout}]}.
// Before each bot the backend stand-in is reset to its seed with POST /__run?name=node/<name>, so
// every bot starts from the same data and what it writes is recorded under its own name.
// result.json: {<name>: {status, body, console: [lines]}}; console holds the bot's own lines, not
// the "Unhandled error"/"Error" lines Medplum's wrapper adds on a failure.
//
// One change to vmcontext's wrapper: it calls module.exports.handler, as the awslambda runtime's
// require() of the module does, so that esbuild's CommonJS (which replaces module.exports) runs;
// vmcontext itself only reads exports.handler.
//
// The sandbox is vmcontext's, plus the Node globals of Medplum's default runtime (awslambda on
// Node 22: Buffer, timers, crypto, structuredClone, atob/btoa, …), which the vmcontext sandbox
// leaves out: bots written for Medplum use them, and fhirgate means to provide them. Like every
// sandbox global, they come from the host's realm, so what they make (structuredClone's copies,
// fetch's JSON) fails an instanceof test against the context's own Date or Map.
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import vm from 'node:vm';
// One instance of @medplum/core for the harness and the bots' require(), as in Medplum's server:
// normalizeOperationOutcome recognises a bot's OperationOutcomeError by its class.
const requireFromHere = createRequire(import.meta.url);
const {
  allOk,
  badRequest,
  ContentType,
  Hl7Message,
  MedplumClient,
  normalizeErrorString,
  normalizeOperationOutcome,
} = requireFromHere('@medplum/core');

const DEFAULT_VM_CONTEXT_TIMEOUT = 10000;

/** BotConsole keeps what a bot logs as Medplum's MockConsole does: one message per call. */
class BotConsole {
  messages = [];
  log(...params) {
    this.messages.push(params.join(' '));
  }
  info(...params) {
    this.log(...params);
  }
  warn(...params) {
    this.log(...params);
  }
  error(...params) {
    this.log(...params);
  }
  debug(...params) {
    this.log(...params);
  }
  toString() {
    return this.messages.join('\n');
  }
}

/** parseInput turns the raw body into the input Medplum's body parsers give the bot. */
function parseInput(raw, contentType) {
  const type = (contentType ?? '').split(';')[0].trim();
  if (type === ContentType.JSON || type.endsWith('+json')) {
    return JSON.parse(raw);
  }
  if (type === ContentType.FORM_URL_ENCODED) {
    return Object.fromEntries(new URLSearchParams(raw));
  }
  return raw; // text/plain and HL7 stay text; the wrapper parses HL7
}

/** runInVmContext mirrors Medplum's: the same sandbox names, wrapper and result. */
async function runInVmContext(job, spec) {
  const botConsole = new BotConsole();
  const traceId = crypto.randomUUID();
  const sandbox = {
    console: botConsole,
    fetch: globalThis.fetch,
    require: requireFromHere,
    ContentType,
    Hl7Message,
    MedplumClient,
    TextDecoder,
    TextEncoder,
    TextDecoderStream,
    TextEncoderStream,
    ReadableStream,
    WritableStream,
    TransformStream,
    URL,
    URLSearchParams,
    Headers,
    Request,
    Response,
    // Node 22 globals of the awslambda runtime.
    Buffer,
    setTimeout,
    clearTimeout,
    setInterval,
    clearInterval,
    setImmediate,
    clearImmediate,
    queueMicrotask,
    structuredClone,
    atob,
    btoa,
    crypto: globalThis.crypto,
    AbortController,
    AbortSignal,
    FormData,
    Blob,
    event: {
      bot: spec.bot,
      baseUrl: job.backend,
      accessToken: job.accessToken,
      requester: job.requester,
      input: parseInput(spec.input, spec.contentType),
      contentType: spec.contentType,
      secrets: job.secrets,
      traceId,
      headers: { 'content-type': spec.contentType },
      defaultHeaders: undefined,
    },
  };

  const wrappedCode = `
  const exports = {};
  const module = {exports};

  // Start user code
  ${spec.code}
  // End user code

  (async () => {
    const { bot, baseUrl, accessToken, requester, contentType, secrets, traceId, headers, defaultHeaders } = event;
    const medplum = new MedplumClient({
      baseUrl,
      defaultHeaders,
      fetch: function(url, options = {}) {
        options.headers ||= {};
        options.headers['X-Trace-Id'] = traceId;
        options.headers['traceparent'] = traceId;
        return fetch(url, options);
      },
    });
    medplum.setAccessToken(accessToken);
    try {
      let input = event.input;
      if (contentType === ContentType.HL7_V2 && input) {
        input = Hl7Message.parse(input);
      }
      let result = await module.exports.handler(medplum, { bot, requester, input, contentType, secrets, traceId, headers });
      if (contentType === ContentType.HL7_V2 && result) {
        result = result.toString();
      }
      return result;
    } catch (err) {
      if (err instanceof Error) {
        console.log("Unhandled error: " + err.message + "\\n" + err.stack);
      } else if (typeof err === "object") {
        console.log("Unhandled error: " + JSON.stringify(err, undefined, 2));
      } else {
        console.log("Unhandled error: " + err);
      }
      throw err;
    }
  })();
  `;

  const timeout = spec.timeout ? spec.timeout * 1000 : DEFAULT_VM_CONTEXT_TIMEOUT;
  let timer;
  // vm's timeout covers synchronous code only; the harness also bounds the awaited part so
  // that one stuck bot cannot hang the suite (Medplum itself does not).
  const deadline = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`harness: bot did not finish in ${timeout} ms`)), timeout + 5000);
  });
  try {
    const returnValue = await Promise.race([vm.runInNewContext(wrappedCode, sandbox, { timeout }), deadline]);
    return { success: true, logResult: botConsole.toString(), returnValue, lines: botConsole.messages };
  } catch (err) {
    const lines = botConsole.messages.filter((m) => !m.startsWith('Unhandled error: '));
    botConsole.log('Error', normalizeErrorString(err));
    return {
      success: false,
      logResult: botConsole.toString(),
      returnValue: normalizeOperationOutcome(err),
      lines,
    };
  } finally {
    clearTimeout(timer);
  }
}

/** answer is what Medplum's $execute handler sends for a result: status and body text. */
function answer(result) {
  let body = result.returnValue;
  if (body === undefined) {
    body = result.success ? allOk : badRequest(result.logResult);
  }
  if (typeof body === 'number') {
    body = body.toString();
  }
  return {
    status: result.success ? 200 : 400,
    body: typeof body === 'string' ? body : JSON.stringify(body),
  };
}

const [jobPath, resultPath] = process.argv.slice(2);
const job = JSON.parse(readFileSync(jobPath, 'utf8'));
const results = {};
for (const spec of job.bots) {
  const reset = await fetch(`${job.backend}/__run?name=${encodeURIComponent('node/' + spec.name)}`, { method: 'POST' });
  if (!reset.ok) {
    throw new Error(`resetting the backend for ${spec.name}: ${reset.status}`);
  }
  const result = await runInVmContext(job, spec);
  results[spec.name] = { ...answer(result), console: result.lines.join('\n').split('\n').filter((l) => l !== '') };
  console.log(`# ${spec.name}: ${results[spec.name].status}`);
}
writeFileSync(resultPath, JSON.stringify(results, null, 2));
