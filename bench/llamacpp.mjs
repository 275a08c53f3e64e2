#!/usr/bin/env node
// llamacpp.mjs measures llama.cpp's prefill and decode speed on a GGUF file
// through node-llama-cpp's prebuilt CPU binary, the way `sluice bench` measures
// sluice: a fixed pseudo-random prompt (prefill), then greedy generation that
// ignores end-of-generation tokens (decode). It prints one JSON object.
//
// Two clocks are reported for each phase:
//   - wall: what this process sees (as sluice bench's figures are wall time
//     through sluice's own graph). Includes node-llama-cpp's JavaScript
//     scheduling and one N-API round trip per token.
//   - llama: llama.cpp's own llama_perf_context counters (what llama-bench and
//     llama-cli print), i.e. without the JavaScript layer.
//
// Usage:
//   node llamacpp.mjs -m MODEL.gguf [--threads 1] [--prompt-tokens 512]
//        [--gen-tokens 128] [--runs 1] [--seed 1] [--flash-attention auto|on|off]
//
// It never builds or downloads anything: getLlama({gpu: false, build: "never"})
// fails if the prebuilt @node-llama-cpp/linux-x64 binaries are missing.

import {parseArgs} from "node:util";
import * as common from "./common.mjs";
import {failer, rng, median} from "./common.mjs";
import {performance} from "node:perf_hooks";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        threads: {type: "string", default: "1"},
        "prompt-tokens": {type: "string", default: "512"},
        "gen-tokens": {type: "string", default: "128"},
        runs: {type: "string", default: "1"},
        seed: {type: "string", default: "1"},
        "flash-attention": {type: "string", default: "auto"},
        verbose: {type: "boolean", short: "v", default: false}
    },
    strict: true
});

const fail = failer("llamacpp.mjs");

const positiveInt = (name) => common.positiveInt(opt, name, fail);

if (opt.model == null)
    fail("-m MODEL.gguf is required");
const threads = positiveInt("threads");
const promptTokens = positiveInt("prompt-tokens");
const genTokens = positiveInt("gen-tokens");
const runs = positiveInt("runs");
const seed = positiveInt("seed");
const flashAttention = {auto: "auto", on: true, off: false}[opt["flash-attention"]];
if (flashAttention === undefined)
    fail(`--flash-attention ${JSON.stringify(opt["flash-attention"])}: want auto, on or off`);

// llama.cpp's perf report arrives through the log callback as lines like
//   "llama_perf_context_print: prompt eval time =  123.45 ms /   512 tokens (...)"
//   "llama_perf_context_print:        eval time =  456.78 ms /   127 runs   (...)"
// so the logger keeps the latest of each and passes warnings on to stderr.
const perf = {promptMs: NaN, promptTokens: 0, evalMs: NaN, evalRuns: 0};
const promptRe = /prompt eval time\s*=\s*([\d.]+)\s*ms\s*\/\s*(\d+)\s*tokens/;
const evalRe = /^\S*:?\s*eval time\s*=\s*([\d.]+)\s*ms\s*\/\s*(\d+)\s*runs/;
function logger(level, message) {
    let m;
    if ((m = promptRe.exec(message)) != null) {
        perf.promptMs = Number(m[1]);
        perf.promptTokens = Number(m[2]);
    } else if ((m = evalRe.exec(message.trim())) != null) {
        perf.evalMs = Number(m[1]);
        perf.evalRuns = Number(m[2]);
    } else if (opt.verbose || level === LlamaLogLevel.error || level === LlamaLogLevel.fatal)
        process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
}



const llama = await getLlama({
    gpu: false,
    build: "never",
    maxThreads: threads,
    logLevel: LlamaLogLevel.info,
    logger
});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
if (!Number.isInteger(vocab) || vocab < 1)
    fail(`${opt.model}: no tokenizer.ggml.tokens array in the GGUF metadata`);
if (promptTokens + genTokens > model.trainContextSize)
    fail(`${opt.model}: ${promptTokens} prompt + ${genTokens} generated tokens exceed the model's context of ${model.trainContextSize}`);

const context = await model.createContext({
    contextSize: promptTokens + genTokens,
    // The whole prompt in one batch, as sluice bench prefills in one chunk.
    batchSize: promptTokens,
    sequences: 1,
    threads: {ideal: threads, min: threads},
    flashAttention,
    performanceTracking: true
});
const sequence = context.getSequence();

const next = rng(seed);
const prompt = Array.from({length: promptTokens}, () => Math.floor(next() * vocab));

const result = {
    model: opt.model,
    engine: "llama.cpp",
    binding: "node-llama-cpp",
    build: llama.buildType,
    threads: context.currentThreads,
    flash_attention: context.flashAttention,
    prompt_tokens: promptTokens,
    gen_tokens: genTokens,
    runs,
    prefill: [],
    decode: [],
    llama_prefill: [],
    llama_decode: []
};

for (let r = 0; r < runs; r++) {
    await sequence.clearHistory();
    await context.printTimings(); // resets llama.cpp's counters
    let generated = 0;
    let tFirst = 0;
    const t0 = performance.now();
    for await (const token of sequence.evaluate(prompt, {temperature: 0, yieldEogToken: true})) {
        void token;
        generated++;
        if (generated === 1)
            tFirst = performance.now();
        if (generated === genTokens)
            break;
    }
    const tEnd = performance.now();
    if (generated !== genTokens)
        fail(`${opt.model}: generation stopped after ${generated} of ${genTokens} tokens`);
    // The first token comes with the prefill; decode is the rest (as in sluice bench).
    result.prefill.push(promptTokens / ((tFirst - t0) / 1000));
    result.decode.push((genTokens - 1) / ((tEnd - tFirst) / 1000));
    perf.promptMs = perf.evalMs = NaN;
    await context.printTimings();
    if (perf.promptTokens !== promptTokens || !(perf.promptMs > 0))
        fail(`llama.cpp perf report: prompt eval of ${perf.promptTokens} tokens in ${perf.promptMs} ms, want ${promptTokens} tokens`);
    result.llama_prefill.push(promptTokens / (perf.promptMs / 1000));
    // llama.cpp counts the decode steps it ran; the last sampled token was never evaluated.
    result.llama_decode.push(perf.evalRuns / (perf.evalMs / 1000));
}

result.prefill_tok_s = median(result.prefill);
result.decode_tok_s = median(result.decode);
result.llama_prefill_tok_s = median(result.llama_prefill);
result.llama_decode_tok_s = median(result.llama_decode);
process.stdout.write(JSON.stringify(result) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
