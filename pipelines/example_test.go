package pipelines_test

import (
	"errors"
	"fmt"

	"github.com/sluicehq/sluice/pipelines"
)

func ExampleParse() {
	src := `name = "tiny"
[[stage]]
id = "tok"
kind = "tokenize"
[[stage]]
id = "sched"
kind = "scheduler"
[[stage]]
id = "embed"
kind = "embed"
[[stage]]
id = "layers"
kind = "transformer_layers"
[[stage]]
id = "head"
kind = "head"
[[stage]]
id = "sample"
kind = "sample"
  [stage.params]
  temperature = 0.0
  seed = 1234
[[stage]]
id = "detok"
kind = "detokenize"
`
	p, err := pipelines.Parse([]byte(src), "tiny.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	s, _ := p.StageOfKind(pipelines.KindSample)
	sp := s.Params.(*pipelines.SampleParams)
	fmt.Println(p.Name, len(p.Stages), "stages")
	fmt.Println("temperature", sp.Temperature, "top_k", sp.TopK, "seed", *sp.Seed)
	// Output:
	// tiny 7 stages
	// temperature 0 top_k 40 seed 1234
}

func ExampleParse_typo() {
	src := "name = \"t\"\n[[stage]]\nid = \"s\"\nkind = \"sample\"\n[stage.params]\ntop_pp = 0.9\n"
	_, err := pipelines.Parse([]byte(src), "t.toml")
	fmt.Println(errors.Is(err, pipelines.ErrUnknownKey))
	e, _ := errors.AsType[*pipelines.Error](err)
	fmt.Println(e)
	// Output:
	// true
	// pipelines: t.toml:6: stage "s": unknown key stage.params.top_pp
}

func ExamplePreset() {
	p, err := pipelines.Preset("greedy")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range p.Stages {
		fmt.Print(s.Kind, " ")
	}
	fmt.Println()
	// Output:
	// tokenize scheduler embed transformer_layers head sample detokenize
}
