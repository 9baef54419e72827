// A CommonJS bot that misbehaves on request.
exports.handler = async (medplum, event) => {
  const what = event.input && event.input.what;
  if (what === 'throw') {
    throw new Error('bot failed on purpose');
  }
  if (what === 'read-then-loop') {
    // The backend sees the read: the run has started.
    await medplum.readResource('Patient', 'started');
    for (;;) {}
  }
  if (what === 'loop') {
    await Promise.resolve();
    for (;;) {}
  }
  if (what === 'headers') {
    return event.headers;
  }
  return { ok: true };
};
