// The Medplum-style peer of scenario 3: an HTTP server that runs a bot the
// way Medplum's vmcontext runtime (packages/server/src/bots/vmcontext.ts)
// does, a fresh vm.runInNewContext for every request, so the harness can
// compare fhirgate's CPU per run with Node's on the same machine.
//
// Per request, as Medplum does per run: a console that captures the bot's
// output, a sandbox with the globals Medplum hands a bot (fetch, require,
// ContentType, Hl7Message, MedplumClient, TextEncoder, URL,
// URLSearchParams) and the event, and the bot's CommonJS code wrapped in a
// script that builds a MedplumClient for the bot (its fetch adding the
// trace headers), sets its access token, parses HL7 input, calls
// exports.handler and logs an unhandled error. What Medplum does around the
// runner (authentication, the Bot read, the AuditEvent write) is not here,
// so the peer's CPU per run is a lower bound of Medplum's.
//
// Usage: node medplumpeer.cjs CODEFILE; prints {"port":N} on stdout once
// listening on 127.0.0.1. Run from a directory where @medplum/core is
// installed.
'use strict';

const fs = require('node:fs');
const http = require('node:http');
const crypto = require('node:crypto');
const vm = require('node:vm');
const { ContentType, Hl7Message, MedplumClient, createReference, normalizeErrorString } = require('@medplum/core');

const code = fs.readFileSync(process.argv[2], 'utf8');
const bot = { resourceType: 'Bot', id: 'echo', name: 'echo' };
const timeoutMs = 10000; // Medplum's DEFAULT_VM_CONTEXT_TIMEOUT

// BotConsole keeps what the bot prints, as Medplum's MockConsole does.
class BotConsole {
  constructor() {
    this.messages = [];
  }
  log(...args) {
    this.messages.push(args.join(' '));
  }
  info(...args) {
    this.log(...args);
  }
  warn(...args) {
    this.log(...args);
  }
  error(...args) {
    this.log(...args);
  }
  debug(...args) {
    this.log(...args);
  }
  toString() {
    return this.messages.join('\n');
  }
}

// The script run in the fresh context: the module's code, then the call.
const script = [
  'const exports = {};',
  'const module = { exports };',
  code,
  ';(async () => {',
  '  const { bot, baseUrl, accessToken, contentType, secrets, traceId, headers, defaultHeaders } = event;',
  '  const medplum = new MedplumClient({',
  '    baseUrl,',
  '    defaultHeaders,',
  '    fetch: (url, options = {}) => {',
  '      options.headers = { ...options.headers, "X-Trace-Id": traceId, traceparent: traceId };',
  '      return fetch(url, options);',
  '    },',
  '  });',
  '  medplum.setAccessToken(accessToken);',
  '  try {',
  '    let input = event.input;',
  '    if (contentType === ContentType.HL7_V2 && input) input = Hl7Message.parse(input);',
  '    let result = await module.exports.handler(medplum, { bot, input, contentType, secrets, traceId, headers });',
  '    if (contentType === ContentType.HL7_V2 && result) result = result.toString();',
  '    return result;',
  '  } catch (err) {',
  '    console.log("Unhandled error: " + (err instanceof Error ? err.message + "\\n" + err.stack : String(err)));',
  '    throw err;',
  '  }',
  '})();',
].join('\n');

async function run(req, body) {
  const contentType = (req.headers['content-type'] || '').split(';')[0].trim();
  let input = body;
  if (contentType === ContentType.JSON || contentType === ContentType.FHIR_JSON) {
    input = JSON.parse(body);
  }
  const botConsole = new BotConsole();
  const headers = { ...req.headers };
  delete headers.authorization;
  const sandbox = {
    console: botConsole,
    fetch,
    require,
    ContentType,
    Hl7Message,
    MedplumClient,
    TextEncoder,
    URL,
    URLSearchParams,
    event: {
      bot: createReference(bot),
      baseUrl: 'http://127.0.0.1:1/',
      accessToken: 'peer-access-token',
      input,
      contentType,
      secrets: {},
      traceId: crypto.randomUUID(),
      headers,
      defaultHeaders: {},
    },
  };
  try {
    const returnValue = await vm.runInNewContext(script, sandbox, { timeout: timeoutMs });
    return { success: true, logResult: botConsole.toString(), returnValue };
  } catch (err) {
    botConsole.log('Error', normalizeErrorString(err));
    return { success: false, logResult: botConsole.toString(), returnValue: normalizeErrorString(err) };
  }
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    run(req, Buffer.concat(chunks).toString('utf8')).then(
      (result) => {
        const out = typeof result.returnValue === 'string' ? result.returnValue : JSON.stringify(result.returnValue);
        res.writeHead(result.success ? 200 : 400, { 'Content-Type': ContentType.JSON });
        res.end(out);
      },
      (err) => {
        res.writeHead(500, { 'Content-Type': 'text/plain' });
        res.end(String(err));
      }
    );
  });
});
server.keepAliveTimeout = 60000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\n');
});
