#!/usr/bin/env node
// batched.mjs measures llama.cpp's aggregate decode speed with N sequences in
// one context (llama-batched-bench's -npl), through node-llama-cpp's prebuilt
// CPU binary, the way `sluice bench --parallel N` measures sluice: N fixed
// pseudo-random prompts prefilled together, then greedy generation that
// ignores end-of-generation tokens. node-llama-cpp batches the concurrent
// evaluations of a context's sequences into one llama_decode per step.
// Aggregate decode = tokens after each sequence's first, over the time from the
// last first token to the last end (every sequence decoding); per-sequence is
// the mean of each sequence's own rate. Prints one JSON object.
//
// Usage:
//   node batched.mjs -m MODEL.gguf --parallel 32 [--threads 1] [--prompt-tokens 16]
//        [--gen-tokens 64] [--runs 1] [--seed 1]

import {parseArgs} from "node:util";
import * as common from "./common.mjs";
import {failer, rng, median} from "./common.mjs";
import {performance} from "node:perf_hooks";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        parallel: {type: "string", default: "1"},
        threads: {type: "string", default: "1"},
        "prompt-tokens": {type: "string", default: "16"},
        "gen-tokens": {type: "string", default: "64"},
        runs: {type: "string", default: "1"},
        seed: {type: "string", default: "1"}
    },
    strict: true
});

const fail = failer("batched.mjs");

const positiveInt = (name) => common.positiveInt(opt, name, fail);

if (opt.model == null)
    fail("-m MODEL.gguf is required");
const parallel = positiveInt("parallel");
const threads = positiveInt("threads");
const promptTokens = positiveInt("prompt-tokens");
const genTokens = positiveInt("gen-tokens");
const runs = positiveInt("runs");
const seed = positiveInt("seed");



const llama = await getLlama({gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.error});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
if (!Number.isInteger(vocab) || vocab < 1)
    fail(`${opt.model}: no tokenizer.ggml.tokens array in the GGUF metadata`);

const context = await model.createContext({
    contextSize: parallel * (promptTokens + genTokens),
    batchSize: parallel * promptTokens,
    sequences: parallel,
    threads: {ideal: threads, min: threads},
    flashAttention: false
});
const sequences = Array.from({length: parallel}, () => context.getSequence());
const next = rng(seed);
const prompts = sequences.map(() => Array.from({length: promptTokens}, () => Math.floor(next() * vocab)));

const result = {
    model: opt.model, engine: "llama.cpp", binding: "node-llama-cpp", build: llama.buildType,
    threads: context.currentThreads, parallel, prompt_tokens: promptTokens, gen_tokens: genTokens, runs,
    decode: [], per_seq_decode: []
};

async function one(seq, prompt) {
    let generated = 0, tFirst = 0;
    const t0 = performance.now();
    for await (const token of seq.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
        void token;
        generated++;
        if (generated === 1)
            tFirst = performance.now();
        if (generated === genTokens)
            break;
    }
    const tEnd = performance.now();
    if (generated !== genTokens)
        fail(`generation stopped after ${generated} of ${genTokens} tokens`);
    return {t0, tFirst, tEnd};
}

for (let r = 0; r < runs; r++) {
    for (const s of sequences)
        await s.clearHistory();
    const times = await Promise.all(sequences.map((s, i) => one(s, prompts[i])));
    const firstAll = Math.max(...times.map((t) => t.tFirst));
    const endAll = Math.max(...times.map((t) => t.tEnd));
    result.decode.push(parallel * (genTokens - 1) / ((endAll - firstAll) / 1000));
    result.per_seq_decode.push(times.reduce((a, t) => a + (genTokens - 1) / ((t.tEnd - t.tFirst) / 1000), 0) / parallel);
}
result.decode_tok_s = median(result.decode);
result.per_seq_decode_tok_s = median(result.per_seq_decode);
process.stdout.write(JSON.stringify(result) + "\n");
await context.dispose();
await model.dispose();
await llama.dispose();
