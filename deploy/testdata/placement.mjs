// placement.mjs sends the openai npm SDK's own audio calls through the
// proxy for TestHAProxyPlacement (deploy/placement_test.go): for every
// model, each call shape PLACEMENT_REPEAT times, each tagged with its
// shape in the X-Placement-Kind header (a request option, which leaves
// the body as the SDK builds it). It prints one JSON line per call:
// {"kind", "model", "ok", "error"}. Env: PLACEMENT_BASE_URL (the proxy's
// /v1 URL), PLACEMENT_MODELS (comma-separated), PLACEMENT_FILE (a small
// upload), PLACEMENT_LARGE_FILE (an upload larger than the proxy's
// buffer), PLACEMENT_REPEAT, and NODE_PATH reaching openai.
import { createRequire } from 'node:module';
import fs from 'node:fs';

const require = createRequire(import.meta.url);
const { default: OpenAI, toFile } = require('openai');

const client = new OpenAI({ baseURL: process.env.PLACEMENT_BASE_URL, apiKey: 'placement', maxRetries: 0, timeout: 30_000 });
const models = process.env.PLACEMENT_MODELS.split(',');
const small = process.env.PLACEMENT_FILE;
const large = process.env.PLACEMENT_LARGE_FILE;
const repeat = Number(process.env.PLACEMENT_REPEAT);

const tag = (kind, extra = {}) => ({ headers: { 'X-Placement-Kind': kind, ...extra } });

// The shapes: what an app writes. The SDK appends form fields in the
// order the object lists them, except that a stream is read first and
// appended last.
const shapes = {
  // OpenAI's documented call: a file stream written first (the SDK sends
  // it chunked, the file part before model).
  'sdk multipart: createReadStream, file first': (model) =>
    client.audio.transcriptions.create({ file: fs.createReadStream(small), model }, tag('sdk multipart: createReadStream, file first')),
  'sdk multipart: toFile, file first': async (model) =>
    client.audio.transcriptions.create({ file: await toFile(fs.readFileSync(small), 'a.wav'), model, language: 'en' }, tag('sdk multipart: toFile, file first')),
  'sdk multipart: toFile, model first': async (model) =>
    client.audio.transcriptions.create({ model, file: await toFile(fs.readFileSync(small), 'a.wav') }, tag('sdk multipart: toFile, model first')),
  'sdk multipart: translations, file first': async (model) =>
    client.audio.translations.create({ file: await toFile(fs.readFileSync(small), 'a.wav'), model }, tag('sdk multipart: translations, file first')),
  'sdk json: speech': (model) =>
    client.audio.speech.create({ model, voice: 'alloy', input: 'Open the garage door.' }, tag('sdk json: speech')),
  // Larger than the proxy's buffer, file first: the body's model is not
  // seen, the X-Sluice-Model hint is.
  'sdk multipart: large file first, X-Sluice-Model hint': async (model) =>
    client.audio.transcriptions.create({ file: await toFile(fs.readFileSync(large), 'a.wav'), model },
      tag('sdk multipart: large file first, X-Sluice-Model hint', { 'X-Sluice-Model': model })),
  // The same without the hint: the documented limit (round-robin).
  'sdk multipart: large file first, no hint': async (model) =>
    client.audio.transcriptions.create({ file: await toFile(fs.readFileSync(large), 'a.wav'), model },
      tag('sdk multipart: large file first, no hint')),
};

for (const [kind, call] of Object.entries(shapes)) {
  for (const model of models) {
    for (let i = 0; i < repeat; i++) {
      try {
        await call(model);
        process.stdout.write(JSON.stringify({ kind, model, ok: true }) + '\n');
      } catch (e) {
        process.stdout.write(JSON.stringify({ kind, model, ok: false, error: `${e?.constructor?.name}: ${e?.status ?? ''} ${e?.message ?? e}` }) + '\n');
      }
    }
  }
}
