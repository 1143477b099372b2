// Seeded random numbers: the same seed gives the same sequence on every
// platform, so seeded sampling replays and generated weights, inputs and
// corruptions reproduce. Three generators share one set of draws: mulberry32,
// which sampling uses; the linear congruential generator of Numerical Recipes,
// which generated inputs and test data use; and xorshift32, which the example
// programs' weights use. Values written down elsewhere depend on each, so
// none replaces another.

/** Draws over a source of 32-bit words. */
export abstract class SeededGenerator {
  /** The next 32-bit word, in [0, 2^32). */
  abstract nextUint32(): number;

  /** Uniform in [0, 1). */
  next(): number {
    return this.nextUint32() / 2 ** 32;
  }

  /** Uniform in [low, high). */
  uniform(low: number, high: number): number {
    return low + (high - low) * this.next();
  }

  /** Uniform in [-scale, scale). */
  signed(scale = 1): number {
    return (this.next() * 2 - 1) * scale;
  }

  /** `count` float32 values uniform in [-scale, scale). */
  signedFloat32(count: number, scale = 1): Float32Array {
    const out = new Float32Array(count);
    for (let i = 0; i < count; i++) out[i] = this.signed(scale);
    return out;
  }
}

/** mulberry32: a small generator with good statistics for its size; sampling draws from it. */
export class Mulberry32 extends SeededGenerator {
  private state: number;

  constructor(seed: number) {
    super();
    this.state = seed >>> 0;
  }

  nextUint32(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
}

/** The LCG state' = 1664525 * state + 1013904223 (mod 2^32); each word is the new state. */
export class Lcg extends SeededGenerator {
  private state: number;

  constructor(seed: number) {
    super();
    this.state = seed >>> 0;
  }

  nextUint32(): number {
    this.state = (Math.imul(this.state, 1664525) + 1013904223) >>> 0;
    return this.state;
  }
}

/** xorshift32 (13, 17, 5); a zero seed, which would stay zero, starts from 0x9e3779b9 instead. */
export class Xorshift32 extends SeededGenerator {
  private state: number;

  constructor(seed: number) {
    super();
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  nextUint32(): number {
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x >>> 0;
    return this.state;
  }
}
