// realtime.mjs streams speech to Sluice's live transcription endpoint with
// the ws npm package (a WebSocket client nobody here wrote); the Go test
// TestRealtimeWSClient starts the server and runs it. It sends the
// transcription session update, then the audio file
// SLUICE_RT_AUDIO (raw pcm16, 24 kHz mono) in 20 ms appends at
// SLUICE_RT_PACE times real time, then a commit, and prints one JSON line:
// {"types": [...server event types in order], "deltas": [...],
// "transcript": "...", "close": code}. Env: SLUICE_RT_URL (ws://...),
// SLUICE_SDK_API_KEY, NODE_PATH reaching ws.
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';

const require = createRequire(import.meta.url);
const WebSocket = require('ws');

const pcm = readFileSync(process.env.SLUICE_RT_AUDIO);
const pace = Number(process.env.SLUICE_RT_PACE || '1');
const chunk = 24000 * 2 / 50; // 20 ms of pcm16 at 24 kHz
const out = { types: [], deltas: [], transcript: null, close: null, error: null };

const ws = new WebSocket(process.env.SLUICE_RT_URL, {
  headers: { Authorization: `Bearer ${process.env.SLUICE_SDK_API_KEY}` },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

ws.on('message', (data) => {
  const ev = JSON.parse(data.toString());
  out.types.push(ev.type);
  if (ev.type === 'conversation.item.input_audio_transcription.delta') out.deltas.push(ev.delta);
  if (ev.type === 'error') out.error = ev.error;
  if (ev.type === 'conversation.item.input_audio_transcription.completed') {
    out.transcript = ev.transcript;
    ws.close(1000, 'done');
  }
});
ws.on('close', (code) => {
  out.close = code;
  process.stdout.write(JSON.stringify(out) + '\n');
});
ws.on('error', (e) => {
  out.error = String(e);
});
ws.on('open', async () => {
  ws.send(JSON.stringify({
    type: 'transcription_session.update',
    session: { input_audio_format: 'pcm16', input_audio_transcription: { model: 'asr', language: 'en' }, turn_detection: null },
  }));
  for (let off = 0; off < pcm.length; off += chunk) {
    ws.send(JSON.stringify({ type: 'input_audio_buffer.append', audio: pcm.subarray(off, off + chunk).toString('base64') }));
    await sleep(20 / pace);
  }
  ws.send(JSON.stringify({ type: 'input_audio_buffer.commit' }));
});
