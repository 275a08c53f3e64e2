// Package spec decides what speculative decoding runs and what it keeps; the
// engine runs the models (decode's Speculative strategy). Beam search is
// package beamsearch.
//
// Every piece is a function or a small state machine over token ids and
// distributions (sample.Dist), with no graph, model or cache code, so the
// engine's strategies stay thin and the math is tested here on
// hand-built distributions:
//
//   - [VerifyChain]: speculative sampling for a chain of γ draft tokens
//     (Leviathan et al. 2023; Chen et al. 2023): accept x with probability
//     min(1, p(x)/q(x)), at the first rejection resample from
//     norm(max(0, p−q)) by token id, else sample a bonus token from p_{γ+1}.
//     The output is distributed exactly as the target's; under greedy it is
//     exactly greedy decoding.
//   - [PromptLookup]: a drafter with no model, proposing the tokens that
//     followed the most recent earlier occurrence of the text's last n-gram.
//   - [Tree]: SpecExec's draft tree, grown by a budgeted best-first search
//     over cumulative draft log-probability, one batched draft pass per
//     [Tree.Expand], and verified by [Tree.Verify] from the target's own
//     sampler, so its output is byte-identical to plain decoding.
//
// Randomness comes from sample.UniformAt keyed by (seed, request, absolute
// position, stream), never from a stateful generator, so each draw is
// reproducible whatever order the engine makes them in; the streams are
// [StreamSample], [StreamDraft], [StreamAccept] and [StreamResidual].
package spec
