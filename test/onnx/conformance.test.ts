// Runs the ONNX node-test suite v1 through the importer and etna, with
// onnxruntime-node on the same models as the control, prints pass/fail per op
// and fails when etna's pass count drops below the recorded floor.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

import { haveNodeTests, loadOrt, NODE_TEST_ROOT, runInEtna, runInOrt, suiteCases, type CaseResult } from './conformance-suite.js';

const floorFile = path.join(path.dirname(fileURLToPath(import.meta.url)), 'conformance-floor.json');
const floor = JSON.parse(fs.readFileSync(floorFile, 'utf8')) as { cases: number; etnaPasses: number };

describe('ONNX node tests (libonnx-testdata) through the importer', () => {
  it('passes at least the recorded number of suite v1 cases', async () => {
    if (!haveNodeTests)
      throw new Error(`ONNX node test data not found at ${NODE_TEST_ROOT} (Debian package libonnx-testdata; scripts/setup.sh installs it)`);
    const cases = suiteCases();
    expect(cases.length).toBe(floor.cases);
    const withOrt = loadOrt() !== null;
    const perOp = new Map<string, { total: number; etna: number; ort: number }>();
    const failures: string[] = [];
    let etnaPasses = 0;
    let ortPasses = 0;
    for (const testCase of cases) {
      const etna: CaseResult = await runInEtna(testCase);
      const ort: CaseResult | undefined = withOrt ? await runInOrt(testCase) : undefined;
      const row = perOp.get(testCase.op) ?? { total: 0, etna: 0, ort: 0 };
      row.total++;
      if (etna.status === 'pass') {
        row.etna++;
        etnaPasses++;
      } else {
        failures.push(
          `  ${testCase.name} (${testCase.op}): ${etna.status}: ${etna.detail ?? ''}${ort ? ` [onnxruntime: ${ort.status}]` : ''}`,
        );
      }
      if (ort?.status === 'pass') {
        row.ort++;
        ortPasses++;
      }
      perOp.set(testCase.op, row);
    }
    const lines = [...perOp.entries()]
      .sort((a, b) => a[0].localeCompare(b[0]))
      .map(
        ([op, r]) =>
          `  ${op.padEnd(24)} ${String(r.etna).padStart(3)}/${String(r.total).padEnd(3)}${withOrt ? `  onnxruntime ${r.ort}/${r.total}` : ''}${r.etna < r.total ? '  <' : ''}`,
      );
    console.log(['ONNX conformance, per op (etna passes/cases):', ...lines].join('\n'));
    if (failures.length > 0) console.log(['not passing:', ...failures].join('\n'));
    console.log(
      `ONNX conformance: etna ${etnaPasses}/${cases.length}${withOrt ? `, onnxruntime-node ${ortPasses}/${cases.length}` : ' (onnxruntime-node not installed)'}; floor ${floor.etnaPasses}`,
    );
    expect(etnaPasses).toBeGreaterThanOrEqual(floor.etnaPasses);
  }, 600_000);
});
