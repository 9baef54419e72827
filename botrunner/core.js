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
    // The string and number constants of core's constants.ts and its other modules, as 5.2.13
    // exports them (TestCoreConstantsMatchThePackage compares them with the package).
    constants() {
      return {
        ALL_SERVICE_TYPES_CODE: 'all',
        CPT: 'http://www.ama-assn.org/go/cpt',
        DEFAULT_ACCEPT: 'application/fhir+json, */*; q=0.1',
        DEFAULT_MAX_SEARCH_COUNT: 1000,
        DEFAULT_SEARCH_COUNT: 20,
        HL7_V2_0203: 'http://terminology.hl7.org/CodeSystem/v2-0203',
        HTTP_HL7_ORG: 'http://hl7.org',
        HTTP_TERMINOLOGY_HL7_ORG: 'http://terminology.hl7.org',
        ICD10: 'http://hl7.org/fhir/sid/icd-10',
        INVALID_MEDICATION_CART_CONTENTS_RESPONSE: 'Invalid response from get-cart bot',
        INVALID_MEDICATION_CART_RESPONSE: 'Invalid response from cart-management bot',
        INVALID_MEDICATION_CHECKOUT_RESPONSE: 'Invalid response from checkout-medications bot',
        INVALID_MEDICATION_ORDER_RESPONSE: 'Invalid response from order medication bot',
        INVALID_MEDICATION_ORDER_SET_RESPONSE: 'Invalid response from order-set bot',
        INVALID_MEDICATION_SEARCH_RESPONSE: 'Invalid response from medication search bot',
        LOINC: 'http://loinc.org',
        MEDICATION_REQUEST_STATUS_REASON_RESPONSE_NOT_RECEIVED: 'response-not-received',
        MEDICATION_REQUEST_STATUS_REASON_SYSTEM: 'https://medplum.com/fhir/CodeSystem/medication-request-status-reason',
        MEDPLUM_CLI_CLIENT_ID: 'medplum-cli',
        MEDPLUM_RELEASES_URL: 'https://meta.medplum.com/releases',
        MEDPLUM_VERSION: '5.2.13-fd453f2',
        NDC: 'http://hl7.org/fhir/sid/ndc',
        OccurrenceChangedExtensionURI: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.occurrenceChanged',
        PARTICIPATION_TYPE_SYSTEM: 'http://terminology.hl7.org/CodeSystem/v3-ParticipationType',
        PATIENT_PREFERRED_PHARMACY_URL: 'http://hl7.org/fhir/StructureDefinition/patient-preferredPharmacy',
        PHARMACY_PREFERENCE_TYPE_SYSTEM: 'https://medplum.com/fhir/CodeSystem/pharmacy-preference-type',
        PHARMACY_TYPE_PREFERRED: 'preferred',
        PHARMACY_TYPE_PRIMARY: 'primary',
        PRIMARY_PERFORMER_CODE: 'PPRF',
        RATE_LIMIT_RESET_EXTENSION_URL: 'https://medplum.com/fhir/StructureDefinition/rate-limit-reset',
        REQUIRES_DIAGNOSIS_CODE: 'requires-diagnosis',
        REQUIRES_MEDICAL_NECESSITY_CODE: 'requires-medical-necessity',
        REQUIRES_PROCEDURE_CODE: 'requires-procedure',
        RXNORM: 'http://www.nlm.nih.gov/research/umls/rxnorm',
        RecurrenceIdExtensionURI: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.recurrenceId',
        RecurrenceTemplateExtensionURI: 'http://hl7.org/fhir/5.0/StructureDefinition/extension-Appointment.recurrenceTemplate',
        RecurringAppointmentSeriesIdentifierSystem: 'https://medplum.com/fhir/recurring-appointment-series',
        SCHEDULING_ELIGIBILITY_SYSTEM: 'https://medplum.com/fhir/CodeSystem/scheduling-eligibility',
        SCHEDULING_SERVICE_TYPE_SYSTEM: 'https://medplum.com/fhir/CodeSystem/scheduling-service-type',
        SNOMED: 'http://snomed.info/sct',
        SchedulingBookedByOperationURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingBookedByOperation',
        SchedulingColorURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingColor',
        SchedulingEncounterCodingURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingEncounterCoding',
        SchedulingExternalUrlURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingExternalUrl',
        SchedulingMedicalNecessityURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingMedicalNecessity',
        SchedulingParametersURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingParameters',
        SchedulingPlanDefinitionURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingPlanDefinition',
        SchedulingScheduleColorURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingColor',
        SchedulingSiteURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingSite',
        SchedulingSlotCapacityURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingSlotCapacity',
        SchedulingUnvalidatedBookingURI: 'https://medplum.com/fhir/StructureDefinition/SchedulingUnvalidatedBooking',
        ServiceTypeReferenceURI: 'https://medplum.com/fhir/service-type-reference',
        TimezoneExtensionURI: 'http://hl7.org/fhir/StructureDefinition/timezone',
        UCUM: 'http://unitsofmeasure.org',
      };
    },

    content() {
      const ContentType = {
        CSS: 'text/css',
        DICOM: 'application/dicom',
        DICOM_JSON: 'application/dicom+json',
        EVENT_STREAM: 'text/event-stream',
        FAVICON: 'image/vnd.microsoft.icon',
        FHIR_JSON: 'application/fhir+json',
        FORM_URL_ENCODED: 'application/x-www-form-urlencoded',
        HL7_V2: 'x-application/hl7-v2+er7',
        HTML: 'text/html',
        JAVASCRIPT: 'text/javascript',
        JOSE: 'application/jose',
        JSON: 'application/json',
        JSON_PATCH: 'application/json-patch+json',
        JWT: 'application/jwt',
        LINKSET_JSON: 'application/linkset+json',
        MULTIPART_FORM_DATA: 'multipart/form-data',
        PNG: 'image/png',
        SCIM_JSON: 'application/scim+json',
        SVG: 'image/svg+xml',
        TEXT: 'text/plain',
        TYPESCRIPT: 'text/typescript',
        PING: 'x-application/ping',
        XML: 'text/xml',
        CDA_XML: 'application/cda+xml',
        OCTET_STREAM: 'application/octet-stream',
      };

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
      const unauthorizedTokenExpired = outcome('unauthorized', 'error', 'login', 'Unauthorized');
      unauthorizedTokenExpired.issue.push({ severity: 'error', code: 'expired', details: { text: 'Token expired' } });
      const unauthorizedTokenAudience = outcome('unauthorized', 'error', 'login', 'Unauthorized');
      unauthorizedTokenAudience.issue.push({ severity: 'error', code: 'invalid', details: { text: 'Token not issued for this audience' } });
      const forbidden = outcome('forbidden', 'error', 'forbidden', 'Forbidden');
      const gone = outcome('gone', 'error', 'deleted', 'Gone');
      const preconditionFailed = outcome('precondition-failed', 'error', 'processing', 'Precondition Failed');
      const multipleMatches = outcome('multiple-matches', 'error', 'multiple-matches', 'Multiple resources found matching condition');
      const tooManyRequests = outcome('too-many-requests', 'error', 'throttled', 'Too Many Requests');
      const unsupportedMediaType = outcome('unsupported-media-type', 'error', 'not-supported', 'Unsupported media type');
      const contentTooLarge = (text) => outcome('content-too-large', 'error', 'too-long', text);
      const serverTimeout = (text) => outcome('server-timeout', 'error', 'timeout', text ?? 'Server timeout');

      function businessRule(key, text) {
        const o = outcome('business-rule', 'error', 'business-rule', text);
        o.issue[0].details = { id: key, text };
        return o;
      }

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
          o.issue[0].details = { coding: [{ code }], text };
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
        'content-too-large': 413,
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
      const isConflict = (o) => o?.id === 'conflict';
      const isCreated = (o) => o?.id === 'created';
      const isUnauthenticated = (o) => o?.id === 'unauthorized';

      function operationOutcomeIssueToString(issue) {
        let s;
        if (issue?.details?.text) {
          s = issue.diagnostics ? `${issue.details.text} (${issue.diagnostics})` : issue.details.text;
        } else {
          s = issue?.diagnostics || 'Unknown error';
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
        constructor(o, options) {
          super(operationOutcomeToString(o));
          if (options?.cause !== undefined) {
            this.cause = options.cause;
          }
          this.name = 'OperationOutcomeError';
          this.outcome = o;
        }

        // The bundled package (corepkg.go) has its own OperationOutcomeError class, which its
        // functions throw (validateResource): as in Medplum, where there is one class, such an
        // error is an instance of this one. Subclasses keep the ordinary test.
        static [Symbol.hasInstance](v) {
          if (Function.prototype[Symbol.hasInstance].call(this, v)) {
            return true;
          }
          return this === OperationOutcomeError && v instanceof Error && v.name === 'OperationOutcomeError' && isOperationOutcome(v.outcome);
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
        businessRule,
        conflict,
        contentTooLarge,
        created,
        forbidden,
        getStatus,
        gone,
        isAccepted,
        isConflict,
        isCreated,
        isGone,
        isNotFound,
        isOk,
        isOperationOutcome,
        isUnauthenticated,
        multipleMatches,
        normalizeErrorString,
        normalizeOperationOutcome,
        notFound,
        notModified,
        operationOutcomeIssueToString,
        operationOutcomeToString,
        preconditionFailed,
        serverError,
        serverTimeout,
        tooManyRequests,
        unauthorized,
        unauthorizedTokenAudience,
        unauthorizedTokenExpired,
        unsupportedMediaType,
        validationError,
      };
    },

    // As Medplum's utils.ts and format.ts (5.2.13) write them.
    references() {
      const isReference = (v) => isObject(v) && isString(v.reference);
      const isResource = (v) => isObject(v) && isString(v.resourceType);
      const isResourceWithId = (v) => isResource(v) && 'id' in v && isString(v.id);
      const isCoding = (v) => isObject(v) && 'code' in v && isString(v.code);
      const isCodeableConcept = (v) => isObject(v) && 'coding' in v && Array.isArray(v.coding) && v.coding.every(isCoding);
      const isTextObject = (v) => isObject(v) && isString(v.text);
      const ensureString = (v) => (isString(v) ? v : undefined);

      // A resource first: some resources (DetectedIssue) have a top-level reference element.
      function getReferenceString(input) {
        if (isResourceWithId(input)) {
          return `${input.resourceType}/${input.id}`;
        }
        if (isReference(input)) {
          return input.reference;
        }
        return undefined;
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
        const builder = [];
        if (name.prefix && options?.prefix !== false) {
          builder.push(...name.prefix);
        }
        if (name.given) {
          builder.push(...name.given);
        }
        if (name.family) {
          builder.push(name.family);
        }
        if (name.suffix && options?.suffix !== false) {
          builder.push(...name.suffix);
        }
        if (name.use && (options?.all || options?.use)) {
          builder.push('[' + name.use + ']');
        }
        if (builder.length === 0) {
          const text = ensureString(name.text);
          if (text) {
            return text;
          }
        }
        return builder.join(' ').trim();
      }

      function formatGivenName(name) {
        const builder = [];
        if (name.given) {
          builder.push(...name.given);
        }
        return builder.join(' ').trim();
      }

      const formatFamilyName = (name) => ensureString(name.family) ?? '';

      function formatCoding(coding, includeCode) {
        const display = ensureString(coding?.display);
        if (display) {
          const code = includeCode ? ensureString(coding?.code) : undefined;
          return `${display}${code ? ' (' + code + ')' : ''}`;
        }
        return ensureString(coding?.code) ?? '';
      }

      function formatCodeableConcept(concept) {
        if (!concept) {
          return '';
        }
        const text = ensureString(concept.text);
        if (text) {
          return text;
        }
        if (concept.coding) {
          return concept.coding.map((c) => formatCoding(c)).join(', ');
        }
        return '';
      }

      const isProfileType = (t) => t === 'Patient' || t === 'Practitioner' || t === 'RelatedPerson';

      function getDisplayString(resource) {
        if (isProfileType(resource.resourceType) && resource.name && resource.name.length > 0) {
          const name = formatHumanName(resource.name[0]);
          if (name) {
            return name;
          }
        }
        const type = resource.resourceType;
        if (type === 'Appointment' && resource.serviceType?.[0]) {
          return formatCodeableConcept(resource.serviceType[0]);
        }
        if (type === 'Device' && resource.deviceName && resource.deviceName.length > 0 && resource.deviceName[0].name) {
          return resource.deviceName[0].name;
        }
        if (type === 'DocumentReference') {
          if (resource.description) {
            return resource.description;
          }
          if (resource.type) {
            return formatCodeableConcept(resource.type);
          }
        }
        if ((type === 'MedicationRequest' || type === 'MedicationStatement') && resource.medicationCodeableConcept) {
          return formatCodeableConcept(resource.medicationCodeableConcept);
        }
        if (type === 'Slot' && (resource.start || resource.end)) {
          // formatDateTime is the package's (it formats with Intl).
          return `${core.formatDateTime(resource.start)} - ${core.formatDateTime(resource.end)}`;
        }
        if (type === 'Subscription' && resource.criteria) {
          return resource.criteria;
        }
        if (type === 'User' && resource.email) {
          return resource.email;
        }
        if ('name' in resource && resource.name && isString(resource.name)) {
          return resource.name;
        }
        if ('code' in resource && resource.code) {
          const code = Array.isArray(resource.code) ? resource.code[0] : resource.code;
          if (isCodeableConcept(code)) {
            return formatCodeableConcept(code);
          }
          if (isTextObject(code)) {
            return code.text;
          }
        }
        return getReferenceString(resource) ?? '';
      }

      function createReference(resource) {
        const reference = getReferenceString(resource) ?? 'undefined/undefined';
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

      // Medplum's removeEmptyFromUnknown: empty strings, null, undefined, empty arrays and objects
      // (those with nothing enumerable left, as a Date) go; in an array they become null, so
      // FHIR's parallel arrays keep their length. A value without empties is returned as it is.
      function removeEmpty(value) {
        if (value === undefined || value === null || value === '') {
          return undefined;
        }
        if (typeof value !== 'object') {
          return value;
        }
        let copy;
        let count = 0;
        if (Array.isArray(value)) {
          for (let i = 0; i < value.length; i++) {
            const v = removeEmpty(value[i]);
            if (v !== value[i] && !copy) {
              copy = Array.from(value);
            }
            if (copy) {
              copy[i] = v === undefined ? null : v;
            }
            if (v !== undefined) {
              count++;
            }
          }
          return count === 0 ? undefined : (copy ?? value);
        }
        for (const key in value) {
          const v = removeEmpty(value[key]);
          if (v !== value[key] && !copy) {
            copy = { ...value };
          }
          if (v === undefined) {
            if (copy) {
              delete copy[key];
            }
          } else {
            if (copy) {
              copy[key] = v;
            }
            count++;
          }
        }
        return count === 0 ? undefined : (copy ?? value);
      }

      function stringify(value, pretty) {
        return JSON.stringify(removeEmpty(value), null, pretty ? 2 : undefined) ?? '';
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
