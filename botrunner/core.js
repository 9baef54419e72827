// The '@medplum/core' module of the bot sandbox: the helpers bots commonly import, written for
// fhirgate from Medplum's documented behaviour (reference/medplum-behaviour.md). The script is
// compiled once per process. It evaluates to a table of groups; Go builds a group the first time a
// run reads one of its exports (see coreExports in core.go), because creating every function of
// the module costs more than most bots spend running. `core` is the module's exports object, for
// references across groups; `native` carries what Go provides (generateId). The HL7 classes and
// date helpers come from package hl7js.
(function (native, core) {
  'use strict';

  const isObject = (v) => v !== null && typeof v === 'object';
  const isString = (v) => typeof v === 'string';

  return {
    content() {
      const ContentType = Object.freeze({
        CDA_XML: 'application/cda+xml',
        CSS: 'text/css',
        CSV: 'text/csv',
        DICOM: 'application/dicom',
        FAVICON: 'image/vnd.microsoft.icon',
        FETCH_LOGS_REQUEST: 'x-application/fetch-logs-request',
        FHIR_JSON: 'application/fhir+json',
        FORM_URL_ENCODED: 'application/x-www-form-urlencoded',
        HL7_V2: 'x-application/hl7-v2+er7',
        HTML: 'text/html',
        JAVASCRIPT: 'text/javascript',
        JSON: 'application/json',
        JSON_PATCH: 'application/json-patch+json',
        JWT: 'application/jwt',
        MULTIPART_FORM_DATA: 'multipart/form-data',
        OCTET_STREAM: 'application/octet-stream',
        PDF: 'application/pdf',
        PING: 'x-application/ping',
        PNG: 'image/png',
        SCIM_JSON: 'application/scim+json',
        SVG: 'image/svg+xml',
        TEXT: 'text/plain',
        TYPESCRIPT: 'text/typescript',
        XML: 'text/xml',
      });

      // Bots get their client as the handler's first argument; there is no network to build another.
      class MedplumClient {
        constructor() {
          throw new Error("MedplumClient cannot be constructed inside a bot: use the handler's medplum argument");
        }
      }
      return { ContentType, MedplumClient };
    },

    outcomes() {
      const isOperationOutcome = (v) => isObject(v) && v.resourceType === 'OperationOutcome';

      function outcome(id, severity, code, text) {
        return { resourceType: 'OperationOutcome', id, issue: [{ severity, code, details: { text } }] };
      }

      const allOk = outcome('ok', 'information', 'informational', 'All OK');
      const created = outcome('created', 'information', 'informational', 'Created');
      const notModified = outcome('not-modified', 'information', 'informational', 'Not Modified');
      const notFound = outcome('not-found', 'error', 'not-found', 'Not found');
      const unauthorized = outcome('unauthorized', 'error', 'login', 'Unauthorized');
      const forbidden = outcome('forbidden', 'error', 'forbidden', 'Forbidden');
      const gone = outcome('gone', 'error', 'deleted', 'Gone');
      const preconditionFailed = outcome('precondition-failed', 'error', 'processing', 'Precondition Failed');
      const tooManyRequests = outcome('too-many-requests', 'error', 'throttled', 'Too Many Requests');

      function accepted(location) {
        const o = outcome('accepted', 'information', 'informational', 'Accepted');
        o.issue[0].diagnostics = location;
        return o;
      }

      function badRequest(text, expression) {
        const issue = { severity: 'error', code: 'invalid', details: { text } };
        if (expression) {
          issue.expression = [expression];
        }
        return { resourceType: 'OperationOutcome', issue: [issue] };
      }

      function conflict(text, code) {
        const o = outcome('conflict', 'error', 'conflict', text);
        if (code) {
          o.issue[0].details.coding = [{ code }];
        }
        return o;
      }

      function validationError(text) {
        return { resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'structure', details: { text } }] };
      }

      function serverError(err) {
        return {
          resourceType: 'OperationOutcome',
          issue: [{ severity: 'error', code: 'exception', details: { text: 'Internal server error' }, diagnostics: String(err) }],
        };
      }

      const statusById = {
        ok: 200,
        created: 201,
        accepted: 202,
        found: 302,
        'not-modified': 304,
        unauthorized: 401,
        forbidden: 403,
        'not-found': 404,
        conflict: 409,
        gone: 410,
        'precondition-failed': 412,
        'multiple-matches': 412,
        'unsupported-media-type': 415,
        'business-rule': 422,
        'too-many-requests': 429,
        'server-timeout': 504,
      };

      function getStatus(o) {
        const status = o && Object.prototype.hasOwnProperty.call(statusById, o.id) ? statusById[o.id] : undefined;
        if (status !== undefined) {
          return status;
        }
        return o?.issue?.[0]?.code === 'exception' ? 500 : 400;
      }

      const isOk = (o) => o?.id === 'ok' || o?.id === 'created' || o?.id === 'not-modified' || o?.id === 'accepted';
      const isNotFound = (o) => o?.id === 'not-found';
      const isGone = (o) => o?.id === 'gone';
      const isAccepted = (o) => o?.id === 'accepted';

      function operationOutcomeIssueToString(issue) {
        let s = issue?.details?.text ?? 'Unknown error';
        if (issue?.diagnostics) {
          s += ' (' + issue.diagnostics + ')';
        }
        if (Array.isArray(issue?.expression) && issue.expression.length > 0) {
          s += ' (' + issue.expression.join(', ') + ')';
        }
        return s;
      }

      function operationOutcomeToString(o) {
        const issues = Array.isArray(o?.issue) ? o.issue : [];
        return issues.length > 0 ? issues.map(operationOutcomeIssueToString).join('; ') : 'Unknown error';
      }

      class OperationOutcomeError extends Error {
        constructor(o, cause) {
          super(operationOutcomeToString(o));
          this.name = 'OperationOutcomeError';
          this.outcome = o;
          if (cause !== undefined) {
            this.cause = cause;
          }
        }
      }

      function normalizeErrorString(err) {
        if (!err) {
          return 'Unknown error';
        }
        if (isString(err)) {
          return err;
        }
        if (err instanceof Error) {
          return err.message;
        }
        if (isOperationOutcome(err)) {
          return operationOutcomeToString(err);
        }
        if (isObject(err) && isString(err.code)) {
          return err.code;
        }
        return JSON.stringify(err);
      }

      function normalizeOperationOutcome(err) {
        if (err instanceof OperationOutcomeError || (err instanceof Error && isOperationOutcome(err.outcome))) {
          return err.outcome;
        }
        if (isOperationOutcome(err)) {
          return err;
        }
        return badRequest(normalizeErrorString(err));
      }

      function assertOk(o, resource) {
        if (!isOk(o) || resource === undefined) {
          throw new OperationOutcomeError(o);
        }
      }
      return {
        OperationOutcomeError,
        accepted,
        allOk,
        assertOk,
        badRequest,
        conflict,
        created,
        forbidden,
        getStatus,
        gone,
        isAccepted,
        isGone,
        isNotFound,
        isOk,
        isOperationOutcome,
        normalizeErrorString,
        normalizeOperationOutcome,
        notFound,
        notModified,
        operationOutcomeIssueToString,
        operationOutcomeToString,
        preconditionFailed,
        serverError,
        tooManyRequests,
        unauthorized,
        validationError,
      };
    },

    references() {
      const isReference = (v) => isObject(v) && isString(v.reference);
      const isResource = (v) => isObject(v) && isString(v.resourceType);
      const isCodeableConcept = (v) => isObject(v) && (Array.isArray(v.coding) || isString(v.text));

      function getReferenceString(input) {
        return isReference(input) ? input.reference : `${input.resourceType}/${input.id}`;
      }

      function resolveId(input) {
        if (!input) {
          return undefined;
        }
        return isReference(input) ? input.reference.split('/')[1] : input.id;
      }

      function parseReference(reference) {
        if (reference?.reference === undefined) {
          throw new core.OperationOutcomeError(core.validationError('Reference missing reference property.'));
        }
        const [type, id] = reference.reference.split('/');
        if (!type || !id) {
          throw new core.OperationOutcomeError(core.validationError('Unable to parse reference string.'));
        }
        return [type, id];
      }

      function formatHumanName(name, options) {
        if (!name) {
          return '';
        }
        const parts = [];
        if (name.prefix && options?.prefix !== false) {
          parts.push(...name.prefix);
        }
        if (name.given) {
          parts.push(...name.given);
        }
        if (name.family) {
          parts.push(name.family);
        }
        if (name.suffix && options?.suffix !== false) {
          parts.push(...name.suffix);
        }
        if (name.use && (options?.all || options?.use)) {
          parts.push('[' + name.use + ']');
        }
        const s = parts.join(' ').trim();
        return s || (isString(name.text) ? name.text : '');
      }

      const formatGivenName = (name) => (name?.given ?? []).join(' ').trim();
      const formatFamilyName = (name) => name?.family ?? '';

      function formatCoding(coding) {
        return coding?.display || coding?.code || '';
      }

      function formatCodeableConcept(concept) {
        if (!concept) {
          return '';
        }
        if (concept.text) {
          return concept.text;
        }
        return (concept.coding ?? []).map(formatCoding).join(', ');
      }

      const isProfileType = (t) => t === 'Patient' || t === 'Practitioner' || t === 'RelatedPerson';

      function getDisplayString(resource) {
        if (isProfileType(resource.resourceType) && Array.isArray(resource.name) && resource.name.length > 0) {
          const name = formatHumanName(resource.name[0]);
          if (name) {
            return name;
          }
        }
        if (resource.resourceType === 'Device' && Array.isArray(resource.deviceName) && resource.deviceName[0]?.name) {
          return resource.deviceName[0].name;
        }
        if (resource.resourceType === 'MedicationRequest' && resource.medicationCodeableConcept) {
          return formatCodeableConcept(resource.medicationCodeableConcept);
        }
        if (resource.resourceType === 'Subscription' && resource.criteria) {
          return resource.criteria;
        }
        if (resource.resourceType === 'User' && resource.email) {
          return resource.email;
        }
        if (isString(resource.name) && resource.name) {
          return resource.name;
        }
        if (resource.code) {
          const code = Array.isArray(resource.code) ? resource.code[0] : resource.code;
          if (isCodeableConcept(code)) {
            return formatCodeableConcept(code);
          }
          if (isString(code?.text)) {
            return code.text;
          }
        }
        return getReferenceString(resource);
      }

      function createReference(resource) {
        const reference = getReferenceString(resource);
        const display = getDisplayString(resource);
        return display === reference ? { reference } : { reference, display };
      }
      return {
        createReference,
        formatCodeableConcept,
        formatCoding,
        formatFamilyName,
        formatGivenName,
        formatHumanName,
        getDisplayString,
        getReferenceString,
        isCodeableConcept,
        isReference,
        isResource,
        parseReference,
        resolveId,
      };
    },

    resources() {
      function getCodeBySystem(concept, system) {
        return concept?.coding?.find((c) => c.system === system)?.code;
      }

      function setCodeBySystem(concept, system, code) {
        concept.coding ??= [];
        const coding = concept.coding.find((c) => c.system === system);
        if (coding) {
          coding.code = code;
        } else {
          concept.coding.push({ system, code });
        }
      }

      function getIdentifier(resource, system) {
        const ids = resource?.identifier;
        if (!ids) {
          return undefined;
        }
        return (Array.isArray(ids) ? ids : [ids]).find((i) => i?.system === system)?.value;
      }

      function setIdentifier(resource, system, value) {
        resource.identifier ??= [];
        const id = resource.identifier.find((i) => i.system === system);
        if (id) {
          id.value = value;
        } else {
          resource.identifier.push({ system, value });
        }
      }

      function getExtension(resource, ...urls) {
        let current = resource;
        for (let i = 0; i < urls.length && current; i++) {
          current = current.extension?.find((e) => e.url === urls[i]);
        }
        return current;
      }

      function getExtensionValue(resource, ...urls) {
        const ext = getExtension(resource, ...urls);
        if (!ext) {
          return undefined;
        }
        const key = Object.keys(ext).find((k) => k.startsWith('value') && k.length > 5);
        return key === undefined ? undefined : ext[key];
      }

      function collectAnswers(items, result, all) {
        for (const item of items ?? []) {
          if (item.linkId && Array.isArray(item.answer) && item.answer.length > 0) {
            if (all) {
              result[item.linkId] = [...(result[item.linkId] ?? []), ...item.answer];
            } else {
              result[item.linkId] = item.answer[0];
            }
          }
          collectAnswers(item.item, result, all);
        }
        return result;
      }

      const getQuestionnaireAnswers = (response) => collectAnswers(response?.item, {}, false);
      const getAllQuestionnaireAnswers = (response) => collectAnswers(response?.item, {}, true);

      function isPopulated(v) {
        if (v === null || v === undefined) {
          return false;
        }
        if (isString(v)) {
          return v !== '';
        }
        if (isObject(v)) {
          return ('length' in v && v.length > 0) || Object.keys(v).length > 0;
        }
        return false;
      }

      function isEmpty(v) {
        if (v === null || v === undefined) {
          return true;
        }
        return (isString(v) || isObject(v)) && !isPopulated(v);
      }

      // FHIR JSON: empty strings and empty objects are dropped, except as array elements.
      function stringify(value, pretty) {
        return JSON.stringify(value, (k, v) => (!/\d+$/.test(k) && isEmpty(v) ? undefined : v), pretty ? 2 : undefined);
      }

      const deepClone = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));
      return {
        deepClone,
        getAllQuestionnaireAnswers,
        getCodeBySystem,
        getExtension,
        getExtensionValue,
        getIdentifier,
        getQuestionnaireAnswers,
        isEmpty,
        isPopulated,
        setCodeBySystem,
        setIdentifier,
        stringify,
      };
    },

    utils() {
      const uuidPattern = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
      const isUUID = (s) => isString(s) && uuidPattern.test(s);

      function calculateAge(birthDate, endDate) {
        const start = new Date(birthDate);
        start.setUTCHours(0, 0, 0, 0);
        const end = endDate ? new Date(endDate) : new Date();
        end.setUTCHours(0, 0, 0, 0);
        let years = end.getUTCFullYear() - start.getUTCFullYear();
        const beforeBirthday =
          end.getUTCMonth() < start.getUTCMonth() ||
          (end.getUTCMonth() === start.getUTCMonth() && end.getUTCDate() < start.getUTCDate());
        if (beforeBirthday) {
          years--;
        }
        let months = end.getUTCFullYear() * 12 + end.getUTCMonth() - (start.getUTCFullYear() * 12 + start.getUTCMonth());
        if (end.getUTCDate() < start.getUTCDate()) {
          months--;
        }
        const days = Math.floor((end.getTime() - start.getTime()) / 86400000);
        return { years, months, days };
      }

      function calculateAgeString(birthDate, endDate) {
        const { years, months, days } = calculateAge(birthDate, endDate);
        if (years >= 2) {
          return String(years).padStart(3, '0') + 'Y';
        }
        if (months >= 1) {
          return String(months).padStart(3, '0') + 'M';
        }
        return String(days).padStart(3, '0') + 'D';
      }

      const capitalize = (s) => (s ? s.charAt(0).toUpperCase() + s.slice(1) : '');
      return { calculateAge, calculateAgeString, capitalize, generateId: native.generateId, isUUID };
    },
  };
})
