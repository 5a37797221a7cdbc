// realtime-sdk.mjs drives the openai npm SDK's own realtime clients against
// Sluice's live transcription endpoint (the Go test TestRealtimeSDKClients
// starts the server over TLS and runs this script; the clients force
// wss:). Clients, unchanged, each on the SDK's baseURL:
//   ga:      OpenAIRealtimeWS from 'openai/realtime/ws' (session.update,
//            type "transcription")
//   beta:    OpenAIRealtimeWS from 'openai/beta/realtime/ws'
//            (transcription_session.update, the OpenAI-Beta header)
//   browser: OpenAIRealtimeWebSocket from 'openai/realtime/websocket', the
//            browser client (the key as the openai-insecure-api-key.
//            subprotocol beside "realtime"), on the ws package as the
//            global WebSocket node 20 lacks
// Each configures the session with model SLUICE_RT_MODEL, tries noise
// reduction (refused with an error event naming the field), streams
// SLUICE_RT_AUDIO (raw pcm16, 24 kHz mono) in 20 ms appends at
// SLUICE_RT_PACE times real time, commits, and closes after the completed
// transcript. It prints one JSON line per client: {"client", "url",
// "protocol", "types", "deltas", "transcript", "refusal", "errors",
// "close"}. Env: SLUICE_SDK_BASE_URL (https://.../v1), SLUICE_SDK_API_KEY,
// NODE_PATH reaching openai and ws, NODE_EXTRA_CA_CERTS trusting the
// server's certificate.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const { default: OpenAI } = require('openai');
const { OpenAIRealtimeWS } = require('openai/realtime/ws');
const { OpenAIRealtimeWS: BetaRealtimeWS } = require('openai/beta/realtime/ws');
const { OpenAIRealtimeWebSocket } = require('openai/realtime/websocket');
globalThis.WebSocket ??= require('ws').WebSocket;

const pcm = readFileSync(process.env.SLUICE_RT_AUDIO);
const pace = Number(process.env.SLUICE_RT_PACE || '1');
const model = process.env.SLUICE_RT_MODEL;
const chunk = 24000 * 2 / 50; // 20 ms of pcm16 at 24 kHz
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const client = new OpenAI({ baseURL: process.env.SLUICE_SDK_BASE_URL, apiKey: process.env.SLUICE_SDK_API_KEY });

const dialects = {
  ga: {
    open: () => new OpenAIRealtimeWS({ model }, client),
    updated: 'session.updated',
    configure: { type: 'session.update', session: { type: 'transcription', audio: { input: {
      format: { type: 'audio/pcm', rate: 24000 }, transcription: { model, language: 'en' }, turn_detection: null, noise_reduction: null } } } },
    noisy: { type: 'session.update', session: { type: 'transcription', audio: { input: { noise_reduction: { type: 'near_field' } } } } },
  },
  beta: {
    open: () => new BetaRealtimeWS({ model }, client),
    updated: 'transcription_session.updated',
    configure: { type: 'transcription_session.update', session: { input_audio_format: 'pcm16',
      input_audio_transcription: { model, language: 'en' }, turn_detection: null, input_audio_noise_reduction: null } },
    noisy: { type: 'transcription_session.update', session: { input_audio_noise_reduction: { type: 'near_field' } } },
  },
};
dialects.browser = { ...dialects.ga, open: () => new OpenAIRealtimeWebSocket({ model }, client) };

// onOpen calls f once the client's socket is open (a ws socket or a
// WebSocket).
function onOpen(rt, f) {
  if (typeof rt.socket.on === 'function') rt.socket.on('open', f);
  else rt.socket.addEventListener('open', f);
}
function onClose(rt, f) {
  if (typeof rt.socket.on === 'function') rt.socket.on('close', (code) => f(code));
  else rt.socket.addEventListener('close', (ev) => f(ev.code));
}

async function drive(name) {
  const d = dialects[name];
  const out = { client: name, url: null, protocol: null, types: [], deltas: [], transcript: null, refusal: null, errors: [], close: null };
  const rt = d.open();
  out.url = String(rt.url);
  let step = null; // resolves the phase waiting on an event type
  let expectRefusal = false; // the next error event answers the noise reduction update
  const waitFor = (type) => new Promise((resolve, reject) => { step = { type, resolve, reject }; });
  rt.on('event', (ev) => {
    out.types.push(ev.type);
    if (ev.type === 'conversation.item.input_audio_transcription.delta') out.deltas.push(ev.delta);
    if (ev.type === 'conversation.item.input_audio_transcription.completed') out.transcript = ev.transcript;
    if (step && ev.type === step.type) { const s = step; step = null; s.resolve(ev); }
  });
  rt.on('error', (e) => {
    if (expectRefusal && e.error?.param && out.refusal === null) {
      out.refusal = { code: e.error.code, param: e.error.param, message: e.error.message };
      expectRefusal = false;
    } else out.errors.push(e.error ? `error event code=${e.error.code} param=${e.error.param}: ${e.error.message}` : String(e.message));
    if (step) { // a refusal ends the step it answered: the failure is reported, not waited out
      const s = step;
      step = null;
      if (s.type === 'error') s.resolve(e);
      else s.reject(new Error(`error event code=${e.error?.code} param=${e.error?.param} waiting for ${s.type}: ${e.error?.message ?? e.message}`));
    }
  });
  const closed = new Promise((resolve) => onClose(rt, (code) => { out.close = code; if (step) step.reject(new Error(`closed ${code} waiting for ${step.type}`)); resolve(); }));
  try {
    await new Promise((resolve, reject) => { onOpen(rt, resolve); setTimeout(() => reject(new Error('no open')), 30000).unref(); });
    out.protocol = rt.socket.protocol ?? null;
    let w = waitFor(d.updated);
    rt.send(d.configure);
    await w;
    w = waitFor('error');
    expectRefusal = true;
    rt.send(d.noisy);
    await w;
    for (let off = 0; off < pcm.length; off += chunk) {
      rt.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(off, off + chunk).toString('base64') });
      await sleep(20 / pace);
    }
    w = waitFor('conversation.item.input_audio_transcription.completed');
    rt.send({ type: 'input_audio_buffer.commit' });
    await w;
    rt.close({ code: 1000, reason: 'done' });
  } catch (e) {
    out.errors.push(String(e?.message ?? e));
    try { rt.close({ code: 1000, reason: 'failed' }); } catch {}
  }
  await closed;
  process.stdout.write(JSON.stringify(out) + '\n');
}

for (const name of ['ga', 'beta', 'browser']) await drive(name);
