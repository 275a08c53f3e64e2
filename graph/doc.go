// Package graph runs typed stages joined by bounded channels.
//
// A pipeline is built with free generic functions (methods cannot take type
// parameters), in the style of Beam: each call adds a node and returns a typed
// Port for its output, and every Port is consumed exactly once.
//
//	g := graph.New(graph.Options{Name: "decode"})
//	toks := graph.Source(g, "prompts", readPrompts)
//	seqs := graph.Then("tokenize", toks, tokenizer, graph.Workers(2), graph.Ordered())
//	graph.Sink("print", seqs, printSeq)
//	err := g.Run(ctx)
//
// The engine, not the stages, owns goroutines, channels, cancellation, errors and
// metrics: nothing runs until Run, a stage only implements Process (plus optional
// Setup, Flush and Close), and its failures and panics are attributed to its node.
// Buffers are small (Buffer(1) by default) so memory stays bounded and a slow stage
// slows its producers; NodeStats shows where time goes (Busy, BlockedOnSend,
// BlockedOnRecv per node).
//
// Shapes beyond a chain: Broadcast (fan-out with a buffer per branch), Merge
// (fan-in), Split (route by predicate), Gather (continuous batching) and Loop (a
// feedback edge with a bounded number of items in flight, for decode steps).
// ThenAny and Erase wire stages whose types are known only at run time, checking
// them before Run.
package graph
