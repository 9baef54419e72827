// The handler's `medplum` argument: Medplum's MedplumClient methods, served by the gateway's FHIR
// backend through native.request, which calls Go synchronously (honouring the run's deadline).
// Every method is async, so it returns a promise that is already settled when the call returns;
// no event loop is needed. Failures reject with '@medplum/core's OperationOutcomeError.
(function (native) {
  'use strict';

  const FHIR_JSON = 'application/fhir+json';
  const JSON_PATCH = 'application/json-patch+json';

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
    if (body !== undefined && body !== null && typeof body !== 'string') {
      body = JSON.stringify(body);
      contentType ??= FHIR_JSON;
    }
    if (typeof body === 'string') {
      contentType ??= FHIR_JSON;
    }
    return request(method, String(url), undefined, body ?? undefined, contentType);
  }

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
