package pipelines

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPresets(t *testing.T) {
	if diff := cmp.Diff([]string{"beam", "chain", "greedy", "sample", "specexec"}, Presets()); diff != "" {
		t.Fatalf("Presets (-want +got):\n%s", diff)
	}
	tests := []struct {
		name string
		want SampleParams
	}{
		{"greedy", SampleParams{Temperature: 0, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}},
		{"sample", SampleParams{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Preset(tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if p.Name != tc.name || p.Source != "<preset "+tc.name+">" || p.Registry() != Default {
				t.Errorf("Name, Source = %q, %q; registry Default: %v", p.Name, p.Source, p.Registry() == Default)
			}
			s, ok := p.StageOfKind(KindSample)
			if !ok {
				t.Fatal("no sample stage")
			}
			if diff := cmp.Diff(&tc.want, s.Params); diff != "" {
				t.Errorf("sample params (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(ModelSpec{}, p.Model); diff != "" {
				t.Errorf("a preset must leave the model to the CLI (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(DefaultSchedulerParams(), p.Stages[1].Params); diff != "" {
				t.Errorf("scheduler params (-want +got):\n%s", diff)
			}
			for _, st := range p.Stages {
				if st.Line == 0 {
					t.Errorf("stage %q has no line", st.ID)
				}
			}
		})
	}
}

func TestPresetUnknown(t *testing.T) {
	_, err := Preset("beam_search")
	if !errors.Is(err, ErrUnknownPreset) {
		t.Fatalf("err = %v, want ErrUnknownPreset", err)
	}
	if want := `pipelines: preset "beam_search" is not one of "beam", "chain", "greedy", "sample", "specexec": pipelines: unknown preset`; err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
}
