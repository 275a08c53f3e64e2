#!/usr/bin/env node
// logits.mjs prints llama.cpp's raw logits along a given token sequence, so
// a difference between sluice and llama.cpp can be measured where it starts
// instead of only seen where greedy ids part. Like ids.mjs it runs
// node-llama-cpp's prebuilt CPU binary with an F32 KV cache and flash
// attention off. The first --prompt-len ids are evaluated as one batch (as
// ids.mjs evaluates its prompt), then each further id alone (as generation
// feeds them), and the logits that predict ids[prompt-len-1+1 …] are kept:
// one dense row of vocabulary size per position from prompt-len-1 on. It
// prints one JSON object: {"model", "ids", "promptLen", "logits"}.
//
// Usage:
//   node logits.mjs -m MODEL.gguf --ids 1,45,300,… --prompt-len 7
//
// It never builds or downloads anything (build: "never").

import {parseArgs} from "node:util";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        ids: {type: "string"},
        "prompt-len": {type: "string"},
        threads: {type: "string", default: "1"}
    },
    strict: true
});

function fail(msg) {
    process.stderr.write(`logits.mjs: ${msg}\n`);
    process.exit(2);
}

if (opt.model == null)
    fail("-m MODEL.gguf is required");
if (opt.ids == null)
    fail("--ids ID,ID,… is required");
const ids = opt.ids.split(",").map(Number);
if (ids.length === 0 || ids.some((t) => !Number.isInteger(t) || t < 0))
    fail(`--ids ${JSON.stringify(opt.ids)}: want comma-separated token ids`);
const promptLen = Number(opt["prompt-len"] ?? ids.length);
const threads = Number(opt.threads);
if (!Number.isInteger(promptLen) || promptLen < 1 || promptLen > ids.length)
    fail(`--prompt-len ${opt["prompt-len"]}: want 1..${ids.length}`);
if (!Number.isInteger(threads) || threads < 1)
    fail("--threads wants an integer ≥ 1");

const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: threads,
    logLevel: LlamaLogLevel.error,
    logger(level, message) {
        process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
    }
});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});

const context = await model.createContext({
    contextSize: ids.length + 1,
    batchSize: promptLen,
    sequences: 1,
    threads: {ideal: threads, min: threads},
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32"
});
const sequence = context.getSequence();
const rows = [];
function dense(m) {
    let n = 0;
    for (const k of m.keys())
        n = Math.max(n, k + 1);
    const row = new Array(n).fill(null);
    for (const [k, v] of m)
        row[k] = v;
    return row;
}
const first = ids.slice(0, promptLen).map((t, i) => (i === promptLen - 1 ? [t, {generateNext: {logits: true}}] : t));
const out = await sequence.controlledEvaluate(first);
rows.push(dense(out[promptLen - 1].next.logits));
for (let i = promptLen; i < ids.length; i++) {
    const o = await sequence.controlledEvaluate([[ids[i], {generateNext: {logits: true}}]]);
    rows.push(dense(o[0].next.logits));
}
process.stdout.write(JSON.stringify({model: opt.model, ids, promptLen, logits: rows}) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
