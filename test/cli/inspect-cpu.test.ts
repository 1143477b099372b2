// `etna inspect --cpu` reports the CPU's vector features and, for each kernel
// family, the best path those features allow (the order of
// native/backends/xnnpack/dot_path.cpp and native/kernels/attention.cpp):
// on x64 the x86 paths, on arm64 the NEON ones.
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';

import { runCli } from '../helpers/cli.js';

interface CpuJson {
  arch: string;
  features: string[];
  paths: { dynamicLinear: string; attention: string; nanScan: string; transposes: string; matmul: string; fp32Functions: string };
}

const X86_FEATURES = ['avx2', 'fma', 'avx512f', 'avx512bw', 'avx512vl', 'avx512vnni'];
const ARM_FEATURES = ['asimd', 'asimddp', 'i8mm'];

function expectedPaths(arch: string, has: (feature: string) => boolean): CpuJson['paths'] {
  if (arch === 'x64') {
    const avx2 = has('avx2') && has('fma');
    const vnni = avx2 && ['avx512f', 'avx512bw', 'avx512vl', 'avx512vnni'].every(has);
    const dynamicLinear = vnni ? 'avx512vnni' : avx2 ? 'avx2' : 'scalar';
    return {
      dynamicLinear,
      attention: has('avx2') ? 'avx2' : 'portable',
      nanScan: has('avx2') ? 'avx2' : 'scalar',
      transposes: avx2 ? 'avx2' : 'scalar',
      matmul: avx2 ? 'avx2' : 'scalar',
      fp32Functions: avx2 ? 'avx2' : 'scalar',
    };
  }
  const neon = has('asimd');
  const dynamicLinear =
    neon && has('asimddp') && has('i8mm') ? 'neon-i8mm' : neon && has('asimddp') ? 'neon-dotprod' : neon ? 'neon' : 'scalar';
  return {
    dynamicLinear,
    attention: neon ? 'neon' : 'portable',
    nanScan: neon ? 'neon' : 'scalar',
    transposes: neon ? 'neon' : 'scalar',
    matmul: neon ? 'neon' : 'scalar',
    fp32Functions: neon ? 'neon' : 'scalar',
  };
}

function inspectCpu(): CpuJson {
  const result = runCli(['inspect', '--cpu', '--json']);
  expect(result.stderr).toBe('');
  expect(result.status).toBe(0);
  return JSON.parse(result.stdout) as CpuJson;
}

describe('etna inspect --cpu', () => {
  it("names this machine's architecture, only features of that architecture, and the paths they allow", () => {
    const info = inspectCpu();
    expect(info.arch).toBe(process.arch);
    const own = info.arch === 'x64' ? X86_FEATURES : ARM_FEATURES;
    for (const feature of info.features) expect(own).toContain(feature);
    // NEON is part of every arm64 CPU Linux runs on.
    if (info.arch === 'arm64') expect(info.features).toContain('asimd');
    expect(info.paths).toEqual(expectedPaths(info.arch, (feature) => info.features.includes(feature)));
    // On x64 the kernel's list is the CPU's own (under an arm64 emulator it
    // may be the host's): AVX2 and FMA as it says, nothing it lacks (Linux
    // spells VNNI avx512_vnni).
    if (info.arch === 'x64') {
      const flags = new Set((/^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? '').trim().split(/\s+/));
      const listed = (feature: string) => flags.has(feature === 'avx512vnni' ? 'avx512_vnni' : feature);
      for (const feature of ['avx2', 'fma']) expect(info.features.includes(feature)).toBe(listed(feature));
      for (const feature of info.features) expect(listed(feature)).toBe(true);
    }
  });

  it('prints the architecture and one line per kernel family without --json', () => {
    const info = inspectCpu();
    const result = runCli(['inspect', '--cpu']);
    expect(result.status).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`cpu: ${info.arch}, features: ${info.features.join(' ') || '(none)'}`);
    expect(lines.slice(1).map((line) => line.trim().split(/\s+/))).toEqual(Object.entries(info.paths));
  });

  it('is bad usage with a FILE, and a FILE is needed without it', () => {
    const both = runCli(['inspect', '--cpu', 'model.pte']);
    expect(both.status).toBe(2);
    expect(both.stderr).toMatch(/--cpu takes no FILE/);
    const neither = runCli(['inspect']);
    expect(neither.status).toBe(2);
    expect(neither.stderr).toMatch(/expected a FILE \(or --cpu\)/);
  });
});
