// sdk.mjs drives the official openai npm SDK against a Sluice server (the
// Go test TestOpenAISDK starts it and runs this script). It prints one
// JSON line per check: {"check", "ok", "call", "result"}; the Go test
// requires every check it knows by name. Env: SLUICE_SDK_BASE_URL (the
// server's /v1 URL), SLUICE_SDK_API_KEY, SLUICE_SDK_MANAGEMENT_KEY (for
// models.delete) and NODE_PATH reaching openai.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const { default: OpenAI, toFile, BadRequestError, AuthenticationError, NotFoundError } = require('openai');

const baseURL = process.env.SLUICE_SDK_BASE_URL;
const apiKey = process.env.SLUICE_SDK_API_KEY;
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 60_000 });

const SENTENCE = 'Open the garage door.';
const WORDS = ['open', 'the', 'garage', 'door'];

function emit(check, ok, call, result) {
  process.stdout.write(JSON.stringify({ check, ok: !!ok, call, result: String(result) }) + '\n');
}

// run runs one check; a thrown error fails it with the error's text.
async function run(check, call, fn) {
  try {
    const [ok, result] = await fn();
    emit(check, ok, call, result);
  } catch (e) {
    emit(check, false, call, `threw ${e?.constructor?.name}: ${e?.status ?? ''} ${e?.message ?? e}`);
  }
}

// heard counts the sentence's words in a transcript.
function heard(text) {
  const t = ' ' + String(text).toLowerCase().replace(/[^a-z ]/g, ' ') + ' ';
  return WORDS.filter((w) => t.includes(' ' + w + ' ')).length;
}

// wavInfo parses a RIFF/WAVE file: rate, channels, bits, duration.
function wavInfo(b) {
  if (b.toString('ascii', 0, 4) !== 'RIFF' || b.toString('ascii', 8, 12) !== 'WAVE') throw new Error('not RIFF/WAVE');
  let off = 12, fmt = null;
  while (off + 8 <= b.length) {
    const id = b.toString('ascii', off, off + 4), size = b.readUInt32LE(off + 4);
    if (id === 'fmt ') fmt = { channels: b.readUInt16LE(off + 10), rate: b.readUInt32LE(off + 12), bits: b.readUInt16LE(off + 22) };
    if (id === 'data') {
      if (!fmt) throw new Error('data before fmt');
      const n = Math.min(size, b.length - off - 8);
      return { ...fmt, duration: n / (fmt.rate * fmt.channels * (fmt.bits / 8)) };
    }
    off += 8 + size + (size & 1);
  }
  throw new Error('no data chunk');
}

// flacInfo reads STREAMINFO: rate and duration.
function flacInfo(b) {
  if (b.toString('ascii', 0, 4) !== 'fLaC') throw new Error('no fLaC magic');
  const si = b.subarray(8, 8 + 34);
  const rate = (si[10] << 12) | (si[11] << 4) | (si[12] >> 4);
  const total = (si[13] & 0x0f) * 2 ** 32 + si.readUInt32BE(14);
  return { rate, duration: total / rate };
}

// opusInfo reads the Ogg Opus stream: the last page's granule position
// (48 kHz) less OpusHead's pre-skip.
function opusInfo(b) {
  if (b.toString('ascii', 0, 4) !== 'OggS') throw new Error('no OggS magic');
  const head = b.indexOf('OpusHead');
  if (head < 0) throw new Error('no OpusHead');
  const preSkip = b.readUInt16LE(head + 10);
  const last = b.lastIndexOf('OggS');
  const granule = Number(b.readBigUInt64LE(last + 6));
  return { rate: 48000, duration: (granule - preSkip) / 48000 };
}

function mp3Magic(b) {
  return b.toString('ascii', 0, 3) === 'ID3' || (b[0] === 0xff && (b[1] & 0xe0) === 0xe0);
}

async function speech(format, model = 'tts', extra = {}) {
  const res = await client.audio.speech.create({ model, voice: 'alloy', input: SENTENCE, response_format: format, ...extra });
  return Buffer.from(await res.arrayBuffer());
}

async function transcribe(buf, name, extra = {}) {
  return client.audio.transcriptions.create({ model: 'asr', file: await toFile(buf, name), ...extra });
}

const near = (d, want, tol) => Math.abs(d - want) <= tol;

async function main() {
  // speech in every format, decoded back.
  const wav = await speech('wav').catch(() => null);
  const ref = wav ? wavInfo(wav).duration : NaN; // the sentence's duration, the reference of the others
  await run('speech.wav', "audio.speech.create({response_format:'wav'})", async () => {
    const i = wavInfo(wav);
    return [i.bits === 16 && i.channels === 1 && i.duration > 0.8 && i.duration < 5,
      `${wav.length} B, RIFF ${i.rate} Hz ${i.bits}-bit mono, ${i.duration.toFixed(2)} s`];
  });
  const audio = { wav };
  await run('speech.pcm', "audio.speech.create({response_format:'pcm'})", async () => {
    const b = await speech('pcm');
    const d = b.length / (24000 * 2);
    return [b.length % 2 === 0 && near(d, ref, 0.1), `${b.length} B = ${d.toFixed(2)} s at 24 kHz s16le (wav ${ref.toFixed(2)} s)`];
  });
  await run('speech.pcm.espeak', "audio.speech.create({model:'tts-espeak', response_format:'pcm'})", async () => {
    const w = wavInfo(await speech('wav', 'tts-espeak'));
    const b = await speech('pcm', 'tts-espeak');
    const d = b.length / (24000 * 2);
    return [near(d, w.duration, 0.1), `${b.length} B = ${d.toFixed(2)} s at 24 kHz (engine wav ${w.rate} Hz, ${w.duration.toFixed(2)} s)`];
  });
  await run('speech.flac', "audio.speech.create({response_format:'flac'})", async () => {
    const b = (audio.flac = await speech('flac'));
    const i = flacInfo(b);
    return [near(i.duration, ref, 0.1), `${b.length} B, fLaC ${i.rate} Hz, ${i.duration.toFixed(2)} s`];
  });
  await run('speech.opus', "audio.speech.create({response_format:'opus'})", async () => {
    const b = (audio.opus = await speech('opus'));
    const i = opusInfo(b);
    return [near(i.duration, ref, 0.15), `${b.length} B, Ogg Opus, ${i.duration.toFixed(2)} s`];
  });
  await run('speech.mp3', "audio.speech.create({response_format:'mp3'})", async () => {
    const b = (audio.mp3 = await speech('mp3'));
    // decoded back by the server: verbose_json's duration
    const v = await transcribe(b, 'speech.mp3', { response_format: 'verbose_json' });
    return [mp3Magic(b) && near(v.duration, ref, 0.15), `${b.length} B, MPEG audio, decoded back ${Number(v.duration).toFixed(2)} s`];
  });
  await run('speech.aac', "audio.speech.create({response_format:'aac'})", async () => {
    const b = (audio.aac = await speech('aac'));
    // AAC in ADTS, decoded back by the server (its encoder's priming adds
    // about 1024 samples)
    const v = await transcribe(b, 'speech.aac', { response_format: 'verbose_json' });
    const adts = b.length > 7 && b[0] === 0xff && (b[1] & 0xf6) === 0xf0;
    return [adts && near(v.duration, ref, 0.15), `${b.length} B, AAC (ADTS), decoded back ${Number(v.duration).toFixed(2)} s`];
  });

  // the same sentence transcribed from every container.
  for (const [format, name] of [['wav', 'speech.wav'], ['mp3', 'speech.mp3'], ['flac', 'speech.flac'], ['opus', 'speech.ogg']]) {
    await run(`transcribe.${format}`, `audio.transcriptions.create({file:${name}})`, async () => {
      const r = await transcribe(audio[format], name);
      return [heard(r.text) >= 3, `"${r.text}"`];
    });
  }
  // What browsers' MediaRecorder (WebM/Opus) and phones (M4A/AAC) record.
  for (const [format, env] of [['webm', 'SLUICE_SDK_WEBM'], ['m4a', 'SLUICE_SDK_M4A']]) {
    await run(`transcribe.${format}`, `audio.transcriptions.create({file:speech.${format}})`, async () => {
      const b = readFileSync(process.env[env]);
      const r = await transcribe(b, `speech.${format}`, { response_format: 'verbose_json' });
      return [heard(r.text) >= 3, `${b.length} B upload, ${Number(r.duration).toFixed(2)} s: "${r.text}"`];
    });
  }
  await run('transcribe.srt', "audio.transcriptions.create({response_format:'srt'})", async () => {
    const r = String(await transcribe(wav, 'speech.wav', { response_format: 'srt' }));
    const ok = /^1\r?\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\r?\n/.test(r) && heard(r) >= 3;
    return [ok, JSON.stringify(r.trim())];
  });
  await run('transcribe.vtt', "audio.transcriptions.create({response_format:'vtt'})", async () => {
    const r = String(await transcribe(wav, 'speech.wav', { response_format: 'vtt' }));
    const ok = r.startsWith('WEBVTT') && /^(\d\d:)?\d\d:\d\d\.\d{3} --> (\d\d:)?\d\d:\d\d\.\d{3}$/m.test(r) && heard(r) >= 3;
    return [ok, JSON.stringify(r.trim())];
  });
  await run('transcribe.verbose_json.words', "audio.transcriptions.create({response_format:'verbose_json', timestamp_granularities:['word']})", async () => {
    const r = await transcribe(wav, 'speech.wav', { response_format: 'verbose_json', timestamp_granularities: ['word'] });
    const ws = r.words ?? [];
    let ok = ws.length >= 3 && near(r.duration, ref, 0.05);
    for (let i = 0; i < ws.length; i++) {
      const w = ws[i];
      if (!(w.start >= 0 && w.end >= w.start && w.end <= r.duration + 1e-6)) ok = false;
      if (i > 0 && w.start < ws[i - 1].end - 1e-6) ok = false;
    }
    return [ok, `duration ${r.duration}, ${ws.length} words: ${ws.map((w) => `${w.word}@${w.start}-${w.end}`).join(' ')}`];
  });
  await run('transcribe.stream', "audio.transcriptions.create({stream:true}) for await", async () => {
    const stream = await transcribe(wav, 'speech.wav', { stream: true });
    let deltas = 0, text = '', done = null, other = 0;
    for await (const ev of stream) {
      if (ev.type === 'transcript.text.delta') { deltas++; text += ev.delta; }
      else if (ev.type === 'transcript.text.done') done = ev.text;
      else other++;
    }
    return [deltas > 0 && done !== null && heard(done) >= 3 && text.trim() === done.trim() && other === 0,
      `${deltas} transcript.text.delta, transcript.text.done "${done}"`];
  });

  // speech streamed as SSE: the SDK returns the raw Response, read here.
  await run('speech.stream.sse', "audio.speech.create({stream_format:'sse'})", async () => {
    const res = await client.audio.speech.create({ model: 'tts', voice: 'alloy', input: SENTENCE, stream_format: 'sse' });
    const body = await res.text();
    const types = [];
    let bytes = 0;
    for (const block of body.split(/\r?\n\r?\n/)) {
      const data = block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
      if (!data) continue;
      const ev = JSON.parse(data);
      types.push(ev.type);
      if (ev.type === 'speech.audio.delta') bytes += Buffer.from(ev.audio, 'base64').length;
    }
    const deltas = types.filter((t) => t === 'speech.audio.delta').length;
    const ok = deltas > 0 && types.at(-1) === 'speech.audio.done' && types.slice(0, -1).every((t) => t === 'speech.audio.delta') && bytes > 0;
    return [ok, `${res.headers.get('content-type')}: ${deltas} speech.audio.delta (${bytes} B audio), then ${types.at(-1)}`];
  });
  await run('speech.stream.audio', "audio.speech.create({stream_format:'audio', response_format:'pcm'})", async () => {
    const res = await client.audio.speech.create({ model: 'tts', voice: 'alloy', input: SENTENCE, stream_format: 'audio', response_format: 'pcm' });
    let chunks = 0, n = 0;
    for await (const c of res.body) { chunks++; n += c.length; }
    const d = n / 48000;
    return [near(d, ref, 0.1), `${chunks} chunks, ${n} B = ${d.toFixed(2)} s of 24 kHz pcm`];
  });

  // refusals.
  await run('transcribe.text_file', 'audio.transcriptions.create({file:notes.txt})', async () => {
    try {
      const r = await transcribe(Buffer.from('These are my notes, not audio at all.\n'.repeat(20)), 'notes.txt');
      return [false, `200 (want 400): ${JSON.stringify(r)}`];
    } catch (e) {
      return [e instanceof BadRequestError && e.status === 400 && e.param === 'file', `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  await run('translations', 'audio.translations.create()', async () => {
    try {
      await client.audio.translations.create({ model: 'asr', file: await toFile(wav, 'speech.wav') });
      return [false, '200 (want 400)'];
    } catch (e) {
      return [e instanceof BadRequestError && e.param === 'model' && /no served model translates/.test(e.message), `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  await run('models.list', 'models.list()', async () => {
    const ids = [];
    let ok = true;
    for await (const m of client.models.list()) {
      ids.push(m.id);
      if (typeof m.created !== 'number' || typeof m.owned_by !== 'string' || m.object !== 'model') ok = false;
    }
    return [ok && ['tts', 'tts-espeak', 'asr', 'vad'].every((id) => ids.includes(id)), `${ids.length} models, each with created and owned_by: ${ids.join(', ')}`];
  });
  await run('models.retrieve', "models.retrieve('asr')", async () => {
    const m = await client.models.retrieve('asr');
    return [m.id === 'asr' && m.object === 'model', JSON.stringify({ id: m.id, object: m.object, owned_by: m.owned_by })];
  });
  await run('models.retrieve.not_found', "models.retrieve('gpt-5-transcribe')", async () => {
    try {
      await client.models.retrieve('gpt-5-transcribe');
      return [false, '200 (want 404)'];
    } catch (e) {
      return [e instanceof NotFoundError && e.param === 'model' && e.code === 'model_not_found', `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  // OpenAI's own names: aliases of the served models (CONTRACT.md
  // names.*), and every stock voice, marin and cedar included, also in
  // the SDK's {id} form.
  await run('names.list', 'models.list() has whisper-1 and tts-1', async () => {
    const byId = {};
    for await (const m of client.models.list()) byId[m.id] = m;
    const ok = byId['whisper-1']?.alias_of === 'asr' && byId['tts-1']?.alias_of === 'tts' && byId['gpt-4o-mini-tts']?.alias_of === 'tts';
    return [ok, `whisper-1 -> ${byId['whisper-1']?.alias_of}, tts-1 -> ${byId['tts-1']?.alias_of}`];
  });
  await run('names.retrieve', "models.retrieve('whisper-1')", async () => {
    const m = await client.models.retrieve('whisper-1');
    return [m.id === 'whisper-1' && m.alias_of === 'asr', JSON.stringify({ id: m.id, alias_of: m.alias_of })];
  });
  await run('names.speech', "audio.speech.create({model:'tts-1', voice:'marin'}), voice cedar, voice {id:'verse'}", async () => {
    const out = [];
    for (const voice of ['marin', 'cedar', { id: 'verse' }]) {
      const res = await client.audio.speech.create({ model: 'tts-1', voice, input: SENTENCE, response_format: 'wav' });
      const b = Buffer.from(await res.arrayBuffer());
      out.push(b.equals(wav));
    }
    return [out.every(Boolean), `the model's default voice each time: ${out.join(', ')}`];
  });
  await run('names.speech.voice_map', "audio.speech.create({model:'tts-espeak', voice:'alloy'}) with voice_map alloy -> en-gb-scotland", async () => {
    const say = async (voice) => Buffer.from(await (await client.audio.speech.create({ model: 'tts-espeak', voice, input: SENTENCE, response_format: 'pcm' })).arrayBuffer());
    const [alloy, mapped, ash] = [await say('alloy'), await say('en-gb-scotland'), await say('ash')];
    return [alloy.equals(mapped) && !alloy.equals(ash), `alloy = en-gb-scotland: ${alloy.equals(mapped)}; ash (unmapped) = the default voice, not alloy's: ${!alloy.equals(ash)}`];
  });
  await run('names.speech.bad_voice', "audio.speech.create({voice:'klingon'})", async () => {
    try {
      await client.audio.speech.create({ model: 'tts-1', voice: 'klingon', input: SENTENCE });
      return [false, '200 (want 400)'];
    } catch (e) {
      const ok = e instanceof BadRequestError && e.param === 'voice' && e.code != null && /slt/.test(e.message);
      return [ok, `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  await run('names.transcribe', "audio.transcriptions.create({model:'whisper-1'}) and gpt-4o-transcribe", async () => {
    const a = await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wav, 'speech.wav') });
    const b = await client.audio.transcriptions.create({ model: 'gpt-4o-transcribe', file: await toFile(wav, 'speech.wav') });
    return [heard(a.text) >= 3 && a.text === b.text, `"${a.text}"`];
  });
  await run('names.bad_request.param', "audio.transcriptions.create({response_format:'docx'})", async () => {
    try {
      await client.audio.transcriptions.create({ model: 'whisper-1', file: await toFile(wav, 'speech.wav'), response_format: 'docx' });
      return [false, '200 (want 400)'];
    } catch (e) {
      const ok = e instanceof BadRequestError && e.param === 'response_format' && e.code != null;
      return [ok, `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  // models.delete needs the management key (CONTRACT.md unreg.delete).
  const admin = new OpenAI({ baseURL, apiKey: process.env.SLUICE_SDK_MANAGEMENT_KEY, maxRetries: 0, timeout: 60_000 });
  await run('models.delete', "models.delete('tts-delete')", async () => {
    const r = await admin.models.delete('tts-delete');
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    return [r.id === 'tts-delete' && r.object === 'model' && r.deleted === true && !ids.includes('tts-delete'),
      `${JSON.stringify(r)}; models.list() then has ${ids.join(', ')}`];
  });
  await run('models.delete.not_found', "models.delete('tts-delete') again", async () => {
    try {
      await admin.models.delete('tts-delete');
      return [false, '200 (want 404)'];
    } catch (e) {
      return [e instanceof NotFoundError && e.status === 404 && e.param === 'model' && e.code === 'model_not_found', `${e.constructor.name} ${e.status} param=${e.param} code=${e.code}: ${e.message}`];
    }
  });
  await run('auth.wrong_key', "models.list() with apiKey 'wrong'", async () => {
    const bad = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
    try {
      await bad.models.list();
      return [false, '200 (want 401)'];
    } catch (e) {
      return [e instanceof AuthenticationError && e.status === 401 && e.code === 'invalid_api_key', `${e.constructor.name} ${e.status} code=${e.code}: ${e.message}`];
    }
  });
}

main().catch((e) => {
  emit('script', false, 'main', `threw ${e?.stack ?? e}`);
  process.exitCode = 1;
});
