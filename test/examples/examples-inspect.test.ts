// `etna inspect` on the authored examples: one state arena size, the state at
// the same offsets in every method, and each weight stored once.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

import { buildExample, EXAMPLE_NAMES } from '../../lib/tools/examples/index.js';
import { runCli } from '../helpers/cli.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'etna-inspect-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

interface StateJson {
  value: number;
  dtype: string;
  shape: number[];
  offset: number;
  bytes: number;
  name?: string;
}

describe('etna inspect on the examples', () => {
  for (const name of EXAMPLE_NAMES) {
    it(`${name}: state placement and weights stored once`, () => {
      const builder = buildExample(name);
      const distinctWeights = new Set(builder.programGraph.constants.map((c) => crypto.createHash('sha256').update(c.bytes).digest('hex')));
      const file = path.join(dir, `${name}.pte`);
      fs.writeFileSync(file, builder.toPte());
      const result = runCli(['inspect', '--json', file]);
      expect(result.status, result.stderr).toBe(0);
      const report = JSON.parse(result.stdout) as {
        constants: { count: number; bytes: number };
        methods: { name: string; memoryPlan: number[]; state: StateJson[] }[];
      };
      expect(report.constants.count).toBe(distinctWeights.size);
      const stateful = report.methods.some((m) => m.state.length > 0);
      if (!stateful) {
        for (const method of report.methods) expect(method.memoryPlan.length).toBeLessThanOrEqual(2);
        return;
      }
      const sizes = new Set(report.methods.map((m) => m.memoryPlan[2]));
      expect(sizes.size).toBe(1);
      const placements = new Map<string, string>();
      for (const method of report.methods) {
        expect(method.memoryPlan.length).toBe(3);
        for (const tensor of method.state) {
          expect(tensor.name).toBeDefined();
          const where = `${tensor.offset}:${tensor.bytes}:${tensor.dtype}`;
          const seen = placements.get(tensor.name!);
          if (seen === undefined) placements.set(tensor.name!, where);
          else expect(where, `${method.name}: ${tensor.name}`).toBe(seen);
        }
      }
      expect(placements.size).toBeGreaterThan(0);
    });
  }
});
