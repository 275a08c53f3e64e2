#!/usr/bin/env node
// grammar.mjs measures llama.cpp's JSON-Schema-constrained decode on a GGUF
// file through node-llama-cpp's prebuilt CPU binary, the way
// `sluice bench --json-schema-file F` measures sluice: a fixed pseudo-random
// prompt, then generation under llama.createGrammarForJsonSchema(schema)
// until the JSON value is complete or --gen-tokens tokens are out. With
// --unconstrained it also generates --gen-tokens tokens without the grammar
// on the same prompt and settings, in the same process, so that one run
// gives llama.cpp's own constrained ÷ unconstrained ratio. It prints one
// JSON object.
//
// Usage:
//   node grammar.mjs -m MODEL.gguf --schema SCHEMA.json [--threads 1]
//        [--prompt-tokens 16] [--gen-tokens 128] [--runs 1] [--seed 1]
//        [--temp 0] [--unconstrained] [--text]
//
// Clocks: decode tok/s is (tokens − 1) ÷ (wall time from the first to the
// last token), as in sluice bench. llama.cpp's own llama_perf_context "eval
// time" counts only llama_decode, not sampling, and the grammar runs in the
// sampler, so it cannot measure a grammar's cost: it is reported
// (llama_eval_tok_s) only to show how much of the wall time is the model.
// cpu_ms_per_token is this process's user+system CPU time from the start of
// the prompt to the last token, over the tokens generated (sluice bench's
// cpu_ms_per_token counts the same span).
//
// What llama.cpp is given: node-llama-cpp turns the schema into GBNF itself
// (its gbnfJson generator, not llama.cpp's json-schema-to-grammar). That
// grammar lets the model write optional whitespace (a space after ':' and
// ',', or a newline and indentation), treats every property as required in
// the schema's order, forbids additional properties unless the schema allows
// them, and after the value wants four newlines (its stop trigger). This
// script stops at the token that completes the value (the text generated so
// far parses as JSON), so those newlines are not counted. Sampling is
// llama.cpp's chain as node-llama-cpp builds it: top-k 40, top-p 0.95,
// temperature, seeded draw (greedy at --temp 0); node-llama-cpp samples first
// and applies the grammar to the whole vocabulary only when the drawn token
// is not allowed.

import {parseArgs} from "node:util";
import {readFileSync} from "node:fs";
import {performance} from "node:perf_hooks";
import * as common from "./common.mjs";
import {failer, rng, median} from "./common.mjs";
import {getLlama, LlamaLogLevel, LlamaGrammarEvaluationState} from "node-llama-cpp";

const {values: opt} = parseArgs({
    options: {
        model: {type: "string", short: "m"},
        schema: {type: "string"},
        threads: {type: "string", default: "1"},
        "prompt-tokens": {type: "string", default: "16"},
        "gen-tokens": {type: "string", default: "128"},
        runs: {type: "string", default: "1"},
        seed: {type: "string", default: "1"},
        temp: {type: "string", default: "0"},
        unconstrained: {type: "boolean", default: false},
        text: {type: "boolean", default: false},
        verbose: {type: "boolean", short: "v", default: false}
    },
    strict: true
});

const fail = failer("grammar.mjs");
const positiveInt = (name) => common.positiveInt(opt, name, fail);

if (opt.model == null)
    fail("-m MODEL.gguf is required");
if (opt.schema == null)
    fail("--schema SCHEMA.json is required");
const threads = positiveInt("threads");
const promptTokens = positiveInt("prompt-tokens");
const genTokens = positiveInt("gen-tokens");
const runs = positiveInt("runs");
const seed = positiveInt("seed");
const temperature = Number(opt.temp);
if (!(temperature >= 0))
    fail(`--temp ${JSON.stringify(opt.temp)}: want a number ≥ 0 (0: greedy)`);

let schema;
try {
    schema = JSON.parse(readFileSync(opt.schema, "utf8"));
} catch (err) {
    fail(`--schema ${opt.schema}: ${err.message}`);
}

// The perf report arrives through the log callback (see llamacpp.mjs).
const perf = {evalMs: NaN, evalRuns: 0};
const evalRe = /^\S*:?\s*eval time\s*=\s*([\d.]+)\s*ms\s*\/\s*(\d+)\s*runs/;
function logger(level, message) {
    let m;
    if ((m = evalRe.exec(message.trim())) != null) {
        perf.evalMs = Number(m[1]);
        perf.evalRuns = Number(m[2]);
    } else if (opt.verbose || level === LlamaLogLevel.error || level === LlamaLogLevel.fatal)
        process.stderr.write(`[llama.cpp ${level}] ${message}\n`);
}

const llama = await getLlama({gpu: false, build: "never", maxThreads: threads, logLevel: LlamaLogLevel.info, logger});
const model = await llama.loadModel({modelPath: opt.model, gpuLayers: 0});
const vocab = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
if (!Number.isInteger(vocab) || vocab < 1)
    fail(`${opt.model}: no tokenizer.ggml.tokens array in the GGUF metadata`);
if (promptTokens + genTokens > model.trainContextSize)
    fail(`${opt.model}: ${promptTokens} prompt + ${genTokens} generated tokens exceed the model's context of ${model.trainContextSize}`);

// Compile: node-llama-cpp's schema-to-GBNF in JavaScript, then llama.cpp's
// GBNF parser (the first evaluation state builds llama.cpp's grammar sampler).
const tc0 = performance.now();
let grammar;
try {
    grammar = await llama.createGrammarForJsonSchema(schema);
} catch (err) {
    fail(`--schema ${opt.schema}: node-llama-cpp refused it: ${err.message}`);
}
const tc1 = performance.now();
void new LlamaGrammarEvaluationState({model, grammar});
const tc2 = performance.now();

const context = await model.createContext({
    contextSize: promptTokens + genTokens,
    batchSize: promptTokens,
    sequences: 1,
    threads: {ideal: threads, min: threads},
    performanceTracking: true
});
const sequence = context.getSequence();

const next = rng(seed);
const prompt = Array.from({length: promptTokens}, () => Math.floor(next() * vocab));

// complete reports whether text is one whole JSON value. Only tried when a
// token closes an object or array (every schema here has one at the top).
function complete(text) {
    try {
        JSON.parse(text);
        return true;
    } catch {
        return false;
    }
}

// generate runs one generation and returns its figures; constrained runs
// stop at the token that completes the value (or at end-of-generation, which
// the grammar allows only there).
async function generate(constrained) {
    await sequence.clearHistory();
    await context.printTimings(); // resets llama.cpp's counters
    const grammarEvaluationState = constrained ? new LlamaGrammarEvaluationState({model, grammar}) : undefined;
    const tokens = [];
    let text = "";
    let done = false;
    let tFirst = 0;
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const it = sequence.evaluate(prompt, {temperature, seed, topK: 40, topP: 0.95, minP: 0, grammarEvaluationState, yieldEogToken: !constrained});
    for await (const token of it) {
        tokens.push(token);
        if (tokens.length === 1)
            tFirst = performance.now();
        if (constrained) {
            const piece = model.detokenize([token]);
            text += piece;
            if ((piece.includes("}") || piece.includes("]")) && complete(text.trim())) {
                done = true;
                break;
            }
        }
        if (tokens.length === genTokens)
            break;
    }
    const tEnd = performance.now();
    const cpu = process.cpuUsage(cpu0);
    if (tokens.length < 2)
        fail(`${opt.model}: ${constrained ? "constrained " : ""}generation gave ${tokens.length} token(s); decode needs 2 or more`);
    perf.evalMs = NaN;
    await context.printTimings();
    const r = {
        tokens: tokens.length,
        completed: done,
        decode_tok_s: (tokens.length - 1) / ((tEnd - tFirst) / 1000),
        llama_eval_tok_s: perf.evalRuns / (perf.evalMs / 1000),
        cpu_ms_per_token: (cpu.user + cpu.system) / 1000 / tokens.length
    };
    if (opt.text)
        r.text = constrained ? text : model.detokenize(tokens);
    return r;
}

const result = {
    model: opt.model,
    schema: opt.schema,
    engine: "llama.cpp",
    binding: "node-llama-cpp",
    build: llama.buildType,
    threads: context.currentThreads,
    temperature,
    seed,
    prompt_tokens: promptTokens,
    gen_tokens: genTokens,
    runs,
    schema_to_gbnf_ms: tc1 - tc0,
    grammar_init_ms: tc2 - tc1,
    constrained: [],
    unconstrained: []
};

for (let r = 0; r < runs; r++) {
    // Alternate which goes first, so that a change in load hits both.
    const order = opt.unconstrained ? (r % 2 === 0 ? [true, false] : [false, true]) : [true];
    for (const c of order)
        result[c ? "constrained" : "unconstrained"].push(await generate(c));
}

const med = (xs, k) => xs.length === 0 ? null : median(xs.map((x) => x[k]));
result.decode_tok_s = med(result.constrained, "decode_tok_s");
result.cpu_ms_per_token = med(result.constrained, "cpu_ms_per_token");
if (opt.unconstrained) {
    result.unconstrained_decode_tok_s = med(result.unconstrained, "decode_tok_s");
    result.unconstrained_cpu_ms_per_token = med(result.unconstrained, "cpu_ms_per_token");
    result.constrained_ratio = result.decode_tok_s / result.unconstrained_decode_tok_s;
}
process.stdout.write(JSON.stringify(result) + "\n");

await context.dispose();
await model.dispose();
await llama.dispose();
