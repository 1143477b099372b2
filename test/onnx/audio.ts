// Test audio for the VAD tests: espeak-ng speech resampled to 16 kHz with sox,
// between stretches of silence and low noise. Without those tools a synthetic
// voiced signal (harmonics with a syllable-rate envelope) stands in.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { Lcg } from '../../lib/random.js';

function hasTool(name: string): boolean {
  try {
    execFileSync(name, ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Deterministic uniform noise in [-amplitude, amplitude]. */
function noise(length: number, amplitude: number, seed: number): Float32Array {
  return new Lcg(seed).signedFloat32(length, amplitude);
}

function synthesizedSpeech(length: number): Float32Array {
  const out = new Float32Array(length);
  for (let i = 0; i < length; i++) {
    const t = i / 16000;
    const pitch = 120 + 30 * Math.sin(2 * Math.PI * 0.7 * t);
    const envelope = Math.max(0, Math.sin(2 * Math.PI * 4 * t));
    let sample = 0;
    for (let h = 1; h <= 8; h++) sample += Math.sin(2 * Math.PI * pitch * h * t) / h;
    out[i] = 0.3 * envelope * sample;
  }
  return out;
}

function espeakSpeech(text: string): Float32Array | undefined {
  if (!hasTool('espeak-ng') || !hasTool('sox')) return undefined;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-vad-'));
  try {
    const wav = path.join(dir, 'speech.wav');
    const raw = path.join(dir, 'speech.f32');
    execFileSync('espeak-ng', ['-w', wav, text], { stdio: 'ignore' });
    execFileSync('sox', [wav, '-r', '16000', '-c', '1', '-e', 'floating-point', '-b', '32', '-t', 'raw', raw], { stdio: 'ignore' });
    const bytes = fs.readFileSync(raw);
    const copy = new Uint8Array(bytes.length - (bytes.length % 4));
    copy.set(bytes.subarray(0, copy.length));
    return new Float32Array(copy.buffer);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** About `seconds` of 16 kHz mono audio: silence, speech, noise, speech, silence. */
export function vadTestAudio(seconds: number): { samples: Float32Array; source: 'espeak-ng' | 'synthetic' } {
  const total = Math.round(seconds * 16000);
  const speech = espeakSpeech(
    'The quick brown fox jumps over the lazy dog. Streaming voice activity detection keeps its state between calls.',
  );
  const voiced = speech ?? synthesizedSpeech(Math.round(total * 0.35));
  const samples = new Float32Array(total);
  const quarter = Math.round(total / 8);
  samples.set(noise(quarter, 0.002, 7), 0);
  let at = quarter;
  const first = voiced.subarray(0, Math.min(voiced.length, Math.round(total * 0.35)));
  samples.set(first, at);
  at += first.length;
  const gap = noise(Math.min(quarter, total - at), 0.05, 11);
  samples.set(gap, at);
  at += gap.length;
  const second = voiced.subarray(0, Math.min(voiced.length, total - at - quarter));
  if (second.length > 0) samples.set(second, at);
  return { samples, source: speech ? 'espeak-ng' : 'synthetic' };
}
