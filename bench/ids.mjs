#!/usr/bin/env node
// ids.mjs prints llama.cpp's greedy token ids for a prompt of token ids, so
// sluice's architectures can be checked against llama.cpp id for id. It runs
// node-llama-cpp's prebuilt CPU binary with an F32 KV cache and flash
// attention off, evaluates the prompt and takes n greedy tokens
// (temperature 0), end-of-generation tokens included, and prints one JSON
// object: {"model", "prompt", "ids", "build"}.
//
// Usage:
//   node ids.mjs -m MODEL.gguf --prompt 1,45,300 [--n 64] [--threads 1]
//
// It never builds or downloads anything (build: "never").

import {parseArgs} from "node:util";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        prompt: {type: "string"},
        n: {type: "string", default: "64"},
        threads: {type: "string", default: "1"},
        verbose: {type: "boolean", short: "v", default: false}
    },
    strict: true
});

function fail(msg) {
    process.stderr.write(`ids.mjs: ${msg}\n`);
    process.exit(2);
}

if (opt.model == null)
    fail("-m MODEL.gguf is required");
if (opt.prompt == null)
    fail("--prompt ID,ID,… is required");
const prompt = opt.prompt.split(",").map(Number);
if (prompt.length === 0 || prompt.some((t) => !Number.isInteger(t) || t < 0))
    fail(`--prompt ${JSON.stringify(opt.prompt)}: want comma-separated token ids`);
const n = Number(opt.n);
const threads = Number(opt.threads);
if (!Number.isInteger(n) || n < 1 || !Number.isInteger(threads) || threads < 1)
    fail("--n and --threads want integers ≥ 1");

const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: threads,
    logLevel: opt.verbose ? LlamaLogLevel.info : LlamaLogLevel.error,
    logger(level, message) {
        process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
    }
});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const context = await model.createContext({
    contextSize: prompt.length + n,
    batchSize: prompt.length,
    sequences: 1,
    threads: {ideal: threads, min: threads},
    flashAttention: false,
    experimentalKvCacheKeyType: "F32",
    experimentalKvCacheValueType: "F32"
});
const sequence = context.getSequence();
const ids = [];
for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
    ids.push(token);
    if (ids.length === n)
        break;
}
if (ids.length !== n)
    fail(`${opt.model}: generation stopped after ${ids.length} of ${n} tokens`);
process.stdout.write(JSON.stringify({model: opt.model, prompt, ids, build: llama.buildType}) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
