#!/usr/bin/env node
// speculative.mjs measures llama.cpp's draft-model speculative decoding
// (node-llama-cpp's DraftSequenceTokenPredictor: a chain of up to --draft-max
// tokens from a draft sequence, validated by the target) against plain
// decoding on the same GGUF files, greedy, ignoring end-of-generation tokens.
// It prints one JSON object: tok/s with and without the draft, and the
// predictor's validated/refuted counts.
//
// Usage:
//   node speculative.mjs -m TARGET.gguf -d DRAFT.gguf [--threads 1] [--gen-tokens 200]
//        [--draft-max 16] [--min-confidence 0.6] [--runs 3]

import {parseArgs} from "node:util";
import {median} from "./common.mjs";
import {performance} from "node:perf_hooks";
import {getLlama, LlamaLogLevel, DraftSequenceTokenPredictor} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        draft: {type: "string", short: "d"},
        threads: {type: "string", default: "1"},
        "gen-tokens": {type: "string", default: "200"},
        "draft-max": {type: "string", default: "16"},
        "min-confidence": {type: "string", default: "0.6"},
        runs: {type: "string", default: "3"}
    },
    strict: true
});
if (opt.model == null || opt.draft == null) {
    process.stderr.write("speculative.mjs: -m TARGET.gguf and -d DRAFT.gguf are required\n");
    process.exit(2);
}
const threads = Number(opt.threads), gen = Number(opt["gen-tokens"]), runs = Number(opt.runs);
const llama = await getLlama({gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.error});
const target = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const draft = await llama.loadModel({modelPath: opt.draft, gpuLayers: 0});
const ctxSize = Math.min(target.trainContextSize, 512);
const tctx = await target.createContext({contextSize: ctxSize, sequences: 2, threads: {ideal: threads, min: threads}, flashAttention: false});
const dctx = await draft.createContext({contextSize: ctxSize, sequences: 1, threads: {ideal: threads, min: threads}, flashAttention: false});
const prompt = target.tokenize("Once upon a time", false);
const bos = target.tokens.bos;
const tokens = bos != null ? [bos, ...prompt] : prompt;

async function decode(seq) {
    let n = 0, tFirst = 0, out = [];
    const t0 = performance.now();
    for await (const tok of seq.evaluate(tokens, {temperature: 0, yieldEogToken: true})) {
        out.push(tok);
        if (++n === 1) tFirst = performance.now();
        if (n === gen) break;
    }
    return {tokS: (n - 1) / ((performance.now() - tFirst) / 1000), out, t0};
}

const plainSeq = tctx.getSequence();
const specSeq = tctx.getSequence({
    tokenPredictor: new DraftSequenceTokenPredictor(dctx.getSequence(), {
        maxTokens: Number(opt["draft-max"]), minConfidence: Number(opt["min-confidence"])
    })
});
const res = {target: opt.model, draft: opt.draft, engine: "llama.cpp", threads, gen_tokens: gen, draft_max: Number(opt["draft-max"]), plain: [], spec: []};
let same = true;
for (let r = 0; r < runs; r++) {
    await plainSeq.clearHistory();
    await specSeq.clearHistory();
    const a = await decode(plainSeq);
    const b = await decode(specSeq);
    res.plain.push(a.tokS);
    res.spec.push(b.tokS);
    same &&= a.out.join(",") === b.out.join(",");
}
const med = median;
res.plain_tok_s = med(res.plain);
res.spec_tok_s = med(res.spec);
res.same_tokens = same;
res.predictions = specSeq.tokenPredictions;
process.stdout.write(JSON.stringify(res) + "\n");
await tctx.dispose(); await dctx.dispose(); await target.dispose(); await draft.dispose(); await llama.dispose();
