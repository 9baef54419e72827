// The handler's `medplum` argument: Medplum's MedplumClient methods, served by the gateway's FHIR
// backend through native.request, which calls Go synchronously (honouring the run's deadline).
// Every method is async, so it returns a promise that is already settled when the call returns;
// no event loop is needed. Failures reject with '@medplum/core's OperationOutcomeError.
(function (native) {
  'use strict';

  const FHIR_JSON = 'application/fhir+json';
  const JSON_PATCH = 'application/json-patch+json';
  const OCTET_STREAM = 'application/octet-stream';

  // refused throws for the methods that need what a bot does not have; docs/bots.md lists them
  // with the same reasons.
  const refused = (method, reason) =>
    function () {
      throw new Error(`medplum.${method} is not available in the bot sandbox: ${reason}`);
    };

  // fhirBase is the gateway's FHIR base for method, ending in '/'.
  function fhirBase(method) {
    if (!native.fhirBaseURL) {
      throw new Error(`medplum.${method} is not available in this run: it was not started by a request to the gateway's FHIR API, so it has no base URL`);
    }
    return native.fhirBaseURL;
  }

  // bytes makes an ArrayBuffer holding exactly a view's bytes, the form native.request sends as
  // they are.
  function bytes(data) {
    if (data instanceof ArrayBuffer) {
      return data;
    }
    return new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice().buffer;
  }

  // Medplum's createBinary, createAttachment and uploadMedia take their arguments positionally or
  // as one options object (normalizeCreateBinaryOptions).
  function binaryOptions(arg, filename, contentType) {
    if (arg !== null && typeof arg === 'object' && !(arg instanceof ArrayBuffer) && !ArrayBuffer.isView(arg) && 'data' in arg) {
      return arg;
    }
    return { data: arg, filename: typeof filename === 'string' ? filename : undefined, contentType };
  }

  // A Blob's reading methods over bytes: what download resolves to, as Medplum's does (the
  // sandbox has no Blob).
  function blobOf(buffer, type) {
    return {
      size: buffer.byteLength,
      type,
      async arrayBuffer() {
        return buffer.slice(0);
      },
      async text() {
        return new TextDecoder().decode(buffer);
      },
    };
  }

  const core = () => native.core();
  const fail = (outcome) => {
    throw new (core().OperationOutcomeError)(outcome);
  };
  const invalid = (text) => fail(core().badRequest(text));

  function name(value, what) {
    if (typeof value !== 'string' || value === '') {
      invalid(`${what} must be a non-empty string`);
    }
    return encodeURIComponent(value);
  }

  function parseBody(res) {
    if (res.status === 204 || res.body === '') {
      return undefined;
    }
    if (res.contentType.includes('json')) {
      try {
        return JSON.parse(res.body);
      } catch {
        return invalid(`the FHIR backend answered invalid JSON (HTTP ${res.status})`);
      }
    }
    return res.body;
  }

  // Medplum's outcome for an error status, as Medplum's server answers it (with its id), so that
  // isNotFound, isGone, isUnauthenticated… and normalizeErrorString of a failed call give what
  // they give in Medplum whatever FHIR server is behind the gateway. text is the backend's own
  // message, kept where Medplum's outcome carries one.
  function statusOutcome(status, text) {
    const c = core();
    switch (status) {
      case 401:
        return c.unauthorized;
      case 403:
        return c.forbidden;
      case 404:
        return c.notFound;
      case 409:
        return c.conflict(text || 'Conflict');
      case 410:
        return c.gone;
      case 412:
        return c.preconditionFailed;
      case 413:
        return c.contentTooLarge(text || 'Content too large');
      case 415:
        return c.unsupportedMediaType;
      case 429:
        return c.tooManyRequests;
      case 504:
        return c.serverTimeout(text || undefined);
      default:
        return undefined;
    }
  }

  // errorOutcome is the outcome a failed call rejects with. A backend outcome that already is
  // Medplum's for the status (Medplum behind the gateway) is kept as it is; for other statuses
  // (400, 422, 5xx) the backend's outcome is kept, or a body that is none becomes badRequest of
  // its text, as Medplum's client does (normalizeOperationOutcome).
  function errorOutcome(status, value) {
    const c = core();
    const isOutcome = c.isOperationOutcome(value);
    const text = isOutcome ? c.operationOutcomeToString(value) : typeof value === 'string' ? value.trim().slice(0, 500) : '';
    const medplums = statusOutcome(status, text);
    if (medplums) {
      return isOutcome && value.id === medplums.id ? value : JSON.parse(JSON.stringify(medplums));
    }
    if (isOutcome) {
      return value;
    }
    if (value !== null && typeof value === 'object') {
      return c.badRequest(c.normalizeErrorString(value));
    }
    return c.badRequest(text || `the FHIR backend answered HTTP ${status}`);
  }

  function request(method, path, query, body, contentType, headers) {
    const res = native.request(method, path, query, body, contentType, headers);
    if (res.status >= 400) {
      let value;
      try {
        value = parseBody(res);
      } catch {
        value = undefined;
      }
      fail(errorOutcome(res.status, value));
    }
    if (res.status === 304) {
      return undefined;
    }
    return parseBody(res);
  }

  function resourceBody(resource, needsId) {
    if (resource === null || typeof resource !== 'object') {
      invalid('a resource must be an object');
    }
    name(resource.resourceType, 'resourceType');
    if (needsId) {
      name(resource.id, 'resource id');
    }
    return JSON.stringify(resource);
  }

  function raw(method, url, body, contentType) {
    if (body instanceof ArrayBuffer || ArrayBuffer.isView(body)) {
      return request(method, String(url), undefined, bytes(body), contentType ?? OCTET_STREAM);
    }
    if (body !== undefined && body !== null && typeof body !== 'string') {
      body = JSON.stringify(body);
      contentType ??= FHIR_JSON;
    }
    if (typeof body === 'string') {
      contentType ??= FHIR_JSON;
    }
    return request(method, String(url), undefined, body ?? undefined, contentType);
  }

  let profile; // getProfile's answer: undefined until read, null when there is none
  let accessToken; // getAccessToken's, once issued
  const medplum = {
    async readResource(resourceType, id) {
      return request('GET', `${name(resourceType, 'resourceType')}/${name(id, 'id')}`);
    },
    async readReference(reference) {
      const ref = reference?.reference;
      if (typeof ref !== 'string') {
        invalid('Reference missing reference property.');
      }
      const [type, id] = ref.split('/');
      if (!type || !id) {
        invalid('Unable to parse reference string.');
      }
      return medplum.readResource(type, id);
    },
    async readHistory(resourceType, id) {
      return request('GET', `${name(resourceType, 'resourceType')}/${name(id, 'id')}/_history`);
    },
    async readVersion(resourceType, id, versionId) {
      return request('GET', `${name(resourceType, 'resourceType')}/${name(id, 'id')}/_history/${name(versionId, 'versionId')}`);
    },
    async search(resourceType, query) {
      return request('GET', name(resourceType, 'resourceType'), native.queryString(query));
    },
    async searchOne(resourceType, query) {
      const bundle = await medplum.search(resourceType, native.withParam(query, '_count', '1'));
      return bundle?.entry?.[0]?.resource;
    },
    async searchResources(resourceType, query) {
      const bundle = await medplum.search(resourceType, query);
      const resources = (bundle?.entry ?? []).map((e) => e.resource);
      Object.defineProperty(resources, 'bundle', { value: bundle });
      return resources;
    },
    async createResource(resource) {
      const body = resourceBody(resource, false);
      return request('POST', name(resource.resourceType, 'resourceType'), undefined, body, FHIR_JSON);
    },
    async createResourceIfNoneExist(resource, query) {
      const body = resourceBody(resource, false);
      const headers = { 'If-None-Exist': native.queryString(query) };
      return request('POST', name(resource.resourceType, 'resourceType'), undefined, body, FHIR_JSON, headers);
    },
    async updateResource(resource) {
      const body = resourceBody(resource, true);
      return request('PUT', `${name(resource.resourceType, 'resourceType')}/${name(resource.id, 'id')}`, undefined, body, FHIR_JSON);
    },
    async upsertResource(resource, query) {
      const body = resourceBody(resource, false);
      return request('PUT', name(resource.resourceType, 'resourceType'), native.queryString(query), body, FHIR_JSON);
    },
    async patchResource(resourceType, id, operations) {
      if (!Array.isArray(operations)) {
        invalid('a JSON Patch must be an array of operations');
      }
      const path = `${name(resourceType, 'resourceType')}/${name(id, 'id')}`;
      return request('PATCH', path, undefined, JSON.stringify(operations), JSON_PATCH);
    },
    async deleteResource(resourceType, id) {
      return request('DELETE', `${name(resourceType, 'resourceType')}/${name(id, 'id')}`);
    },
    async validateResource(resource) {
      const body = resourceBody(resource, false);
      return request('POST', `${name(resource.resourceType, 'resourceType')}/$validate`, undefined, body, FHIR_JSON);
    },
    async executeBatch(bundle) {
      return request('POST', '', undefined, resourceBody(bundle, false), FHIR_JSON);
    },
    async executeBot(idOrIdentifier, body, contentType) {
      // Runs another bot of the same project, as Medplum's client does: a
      // POST to $execute by id, or by identifier {system, value}.
      let path;
      let query;
      if (typeof idOrIdentifier === 'string') {
        path = `Bot/${name(idOrIdentifier, 'bot id')}/$execute`;
      } else if (idOrIdentifier !== null && typeof idOrIdentifier === 'object' && idOrIdentifier.value) {
        path = 'Bot/$execute';
        query = { identifier: `${idOrIdentifier.system ?? ''}|${idOrIdentifier.value}` };
      } else {
        invalid('executeBot needs a bot id or an identifier {system, value}');
      }
      if (body !== undefined && body !== null && typeof body !== 'string') {
        body = JSON.stringify(body);
      }
      if (body !== undefined && body !== null) {
        contentType ??= FHIR_JSON;
      }
      return request('POST', path, query, body ?? undefined, contentType);
    },
    async readPatientEverything(id) {
      return request('GET', `Patient/${name(id, 'id')}/$everything`);
    },
    async readPatientSummary(id) {
      return request('GET', `Patient/${name(id, 'id')}/$summary`);
    },
    async readCanonical(resourceType, url) {
      if (Array.isArray(resourceType)) {
        const bundle = request('GET', '', native.withParam({ _type: resourceType.join(','), url }, '_count', '1'));
        return bundle?.entry?.[0]?.resource;
      }
      return medplum.searchOne(resourceType, { url });
    },
    async valueSetExpand(params) {
      return request('GET', 'ValueSet/$expand', native.queryString(params));
    },
    async graphql(query, operationName, variables) {
      return request('POST', '$graphql', undefined, JSON.stringify({ query, operationName, variables }), 'application/json');
    },
    // Medplum's paging: every page of a search as an array of resources (with its bundle), following
    // the Bundle's next link, 1000 a page unless the query sets _count. A next link names the
    // backend's own URL: its query is asked again of the same resource type, or of the FHIR base
    // when the link is the base's (as HAPI's _getpages links are).
    searchResourcePages(resourceType, query) {
      const first = new URLSearchParams(native.queryString(query));
      if (!first.has('_count')) {
        first.set('_count', '1000');
      }
      let next = { path: name(resourceType, 'resourceType'), query: first.toString() };
      return {
        // goja has no Symbol.asyncIterator; esbuild's for-await (every bot's) then looks this one up.
        [Symbol.asyncIterator ?? Symbol.for('Symbol.asyncIterator')]() {
          return this;
        },
        async next() {
          if (!next) {
            return { done: true, value: undefined };
          }
          const bundle = request('GET', next.path, next.query);
          const link = bundle?.link?.find((l) => l.relation === 'next');
          if (!bundle?.entry?.length && !link) {
            next = undefined;
            return { done: true, value: undefined };
          }
          next = undefined;
          if (link?.url) {
            const u = new URL(link.url, 'http://backend.invalid/');
            const last = u.pathname.split('/').filter(Boolean).pop();
            next = { path: last === resourceType ? resourceType : '', query: u.search.slice(1) };
          }
          const resources = (bundle.entry ?? []).map((e) => e.resource);
          Object.defineProperty(resources, 'bundle', { value: bundle });
          return { done: false, value: resources };
        },
        async return() {
          next = undefined;
          return { done: true, value: undefined };
        },
      };
    },
    // Medplum posts the raw bytes to Binary (?_filename=…) with the data's own Content-Type; a FHIR
    // server stores them as a Binary and answers the resource.
    async createBinary(arg, filename, contentType) {
      const o = binaryOptions(arg, filename, contentType);
      const query = o.filename ? { _filename: o.filename } : undefined;
      const data = o.data instanceof ArrayBuffer || ArrayBuffer.isView(o.data) ? bytes(o.data) : String(o.data ?? '');
      return request('POST', 'Binary', query, data, o.contentType ?? OCTET_STREAM);
    },
    // The Attachment of a new Binary. Medplum's url is the Binary's presigned url; a backend
    // without one gets the Binary's reference.
    async createAttachment(arg, filename, contentType) {
      const o = binaryOptions(arg, filename, contentType);
      const binary = await medplum.createBinary(o);
      return { contentType: o.contentType, url: binary?.url ?? `Binary/${binary?.id}`, title: o.filename };
    },
    // Medplum's createMedia: a Media in preparation, its content as a Binary, then completed.
    async uploadMedia(data, contentType, filename, additionalFields) {
      const media = await medplum.createResource({ resourceType: 'Media', status: 'preparation', content: { contentType }, ...additionalFields });
      const content = await medplum.createAttachment({ data, contentType, filename });
      return medplum.updateResource({ ...media, status: 'completed', content });
    },
    // A Binary of the FHIR backend (a Binary/{id} reference or URL, or an Attachment url made by
    // createAttachment) as a Blob-like object: size, type, arrayBuffer(), text().
    async download(url) {
      const path = String(url);
      if (!/(^|\/)Binary\/[^/?#]+([?#].*)?$/.test(path)) {
        invalid(`medplum.download reads only Binary resources of the FHIR backend, not '${path.slice(0, 100)}'`);
      }
      const binary = request('GET', path);
      if (!core().isResource(binary) || binary.resourceType !== 'Binary') {
        invalid('the FHIR backend did not answer a Binary');
      }
      return blobOf(native.fromBase64(binary.data ?? ''), binary.contentType ?? OCTET_STREAM);
    },
    // Medplum's comment on a resource: a Communication based on it, sent by the run's profile.
    async createComment(resource, text) {
      const c = core();
      const profile = medplum.getProfile();
      let encounter;
      let subject;
      if (resource.resourceType === 'Encounter') {
        encounter = c.createReference(resource);
        subject = resource.subject;
      }
      if (resource.resourceType === 'ServiceRequest') {
        encounter = resource.encounter;
        subject = resource.subject;
      }
      if (resource.resourceType === 'Patient') {
        subject = c.createReference(resource);
      }
      return medplum.createResource({
        resourceType: 'Communication',
        status: 'completed',
        basedOn: [c.createReference(resource)],
        encounter,
        subject,
        sender: profile ? c.createReference(profile) : undefined,
        sent: new Date().toISOString(),
        payload: [{ contentString: text }],
      });
    },
    // The profile the run's calls are made as (the caller's, event.requester), read from the
    // backend on first use; undefined when the run has none.
    getProfile() {
      if (profile === undefined) {
        const ref = native.requester();
        profile = null;
        if (ref) {
          try {
            const [type, id] = ref.split('/');
            profile = request('GET', `${name(type, 'profile type')}/${name(id, 'profile id')}`) ?? null;
          } catch {
            profile = null;
          }
        }
      }
      return profile ?? undefined;
    },
    async getProfileAsync() {
      return medplum.getProfile();
    },
    // The client is ready when the run starts: there is no login to wait for.
    isLoading() {
      return false;
    },
    async startAsyncRequest(url, options) {
      let body = options?.body ?? undefined;
      if (body !== undefined && typeof body !== 'string') {
        body = JSON.stringify(body);
      }
      const res = native.request('POST', String(url), undefined, body, body === undefined ? undefined : FHIR_JSON, { Prefer: 'respond-async' });
      if (res.status >= 400) {
        fail(errorOutcome(res.status, parseBody(res)));
      }
      return parseBody(res);
    },
    // Medplum's client posts to its server's email API; the gateway answers that path itself,
    // sending through the SMTP server its operator configured (docs/bots.md).
    async sendEmail(email) {
      if (email === null || typeof email !== 'object') {
        invalid('sendEmail needs an email object {to, subject, text…}');
      }
      return request('POST', 'email/v1/send', undefined, JSON.stringify(email), 'application/json');
    },
    createPdf: refused('createPdf', "it renders with Medplum's server (pdfmake and its fonts), which fhirgate does not have"),
    // A token acting as the run's identity, issued by the gateway on first use and revoked when the
    // run ends (docs/bots.md).
    getAccessToken() {
      if (accessToken === undefined) {
        const res = native.request('POST', 'auth/run-token');
        if (res.status >= 400) {
          fail(errorOutcome(res.status, parseBody(res)));
        }
        accessToken = parseBody(res).accessToken;
      }
      return accessToken;
    },
    setAccessToken: refused('setAccessToken', 'the identity of a run is set by the gateway: its calls are made as the caller'),
    getActiveLogin: refused('getActiveLogin', "a run has no Medplum login (tokens, project, membership) of its own"),
    getProject: refused('getProject', "Medplum's Project resource lives in Medplum's server, not in the FHIR backend"),
    // URLs of the gateway's FHIR API as the run's caller reached it (Medplum's: the FHIR base
    // under its server's base URL).
    fhirUrl(...path) {
      return new URL(fhirBase('fhirUrl') + path.join('/'));
    },
    fhirSearchUrl(resourceType, query) {
      const url = medplum.fhirUrl(resourceType);
      const search = native.queryString(query);
      if (search) {
        url.search = search;
      }
      return url;
    },
    // Medplum's base URL: the FHIR base without Medplum's "fhir/R4/", else the gateway's origin.
    getBaseUrl() {
      const base = fhirBase('getBaseUrl');
      return base.endsWith('/fhir/R4/') ? base.slice(0, -'fhir/R4/'.length) : /^[^:]+:\/\/[^/]+\//.exec(base)[0];
    },
    requestSchema: refused('requestSchema', "it loads StructureDefinitions through Medplum's GraphQL API; bots validate with medplum.validateResource"),
    invite: refused('invite', "it is Medplum's admin API (projects, memberships), which the FHIR backend does not have"),
    pushToAgent: refused('pushToAgent', "Medplum's agents connect to Medplum's server, not to fhirgate"),
    async get(url) {
      return raw('GET', url);
    },
    async post(url, body, contentType) {
      return raw('POST', url, body, contentType);
    },
    async put(url, body, contentType) {
      return raw('PUT', url, body, contentType);
    },
    async patch(url, body, contentType) {
      return raw('PATCH', url, body, contentType ?? JSON_PATCH);
    },
    async delete(url) {
      return raw('DELETE', url);
    },
  };
  return medplum;
})
