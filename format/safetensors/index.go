package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/sluicehq/sluice/tensor"
)

// IndexFile and SingleFile are the names Hugging Face gives a model's weights:
// one file, or shards listed by an index.
const (
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors"
)

// Index is the JSON content of a sharded model's index file.
type Index struct {
	Metadata  map[string]any    `json:"metadata,omitempty"` // e.g. "total_size"
	WeightMap map[string]string `json:"weight_map"`         // tensor name → shard file name
}

// Set is every tensor of a model, spread over one or more files.
type Set struct {
	Files []*File // shards, sorted by file name; offload.File{Path, Tensors} per entry
	loc   map[string]int
}

// OpenDir opens the weights of a Hugging Face model directory: the shards named
// by model.safetensors.index.json when it exists, else model.safetensors.
func OpenDir(dir string) (*Set, error) {
	idx := filepath.Join(dir, IndexFile)
	if _, err := os.Stat(idx); err == nil {
		return OpenIndex(idx)
	}
	single := filepath.Join(dir, SingleFile)
	f, err := Open(single)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("safetensors: %s: neither %s nor %s found: %w", dir, IndexFile, SingleFile, os.ErrNotExist)
		}
		return nil, err
	}
	return newSet([]*File{f}), nil
}

// OpenIndex reads a model.safetensors.index.json and the shards it names (which
// must sit in the same directory). Every tensor in the weight map must be in the
// shard it names, and every tensor in a shard must be in the weight map: a
// disagreement means the index and the shards come from different exports.
func OpenIndex(path string) (*Set, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{Path: path, Offset: -1, Msg: err.Error(), Err: err}
	}
	var idx Index
	if err := json.Unmarshal(data, &idx); err != nil {
		off := int64(-1)
		if se, ok := errors.AsType[*json.SyntaxError](err); ok {
			off = se.Offset
		} else if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			off = te.Offset
		}
		return nil, &Error{Path: path, Offset: off, Msg: "bad index JSON: " + err.Error(), Err: ErrCorrupt}
	}
	if idx.WeightMap == nil {
		return nil, &Error{Path: path, Offset: -1, Msg: "missing \"weight_map\"", Err: ErrCorrupt}
	}
	dir := filepath.Dir(path)
	names := slices.Sorted(maps.Keys(idx.WeightMap)) // deterministic error reports
	var shards []string
	for _, name := range names {
		shard := idx.WeightMap[name]
		if !filepath.IsLocal(shard) || shard != filepath.Base(shard) {
			return nil, &Error{Path: path, Offset: -1, Err: ErrCorrupt,
				Msg: fmt.Sprintf("weight_map[%q] = %q: want a file name in the index's directory", name, shard)}
		}
		if !slices.Contains(shards, shard) {
			shards = append(shards, shard)
		}
	}
	slices.Sort(shards)
	files := make([]*File, len(shards))
	for i, shard := range shards {
		if files[i], err = Open(filepath.Join(dir, shard)); err != nil {
			return nil, err
		}
	}
	s := newSet(files)
	for _, name := range names {
		shard := idx.WeightMap[name]
		fi, ok := s.loc[name]
		if !ok {
			return nil, &Error{Path: path, Offset: -1, Err: ErrCorrupt,
				Msg: fmt.Sprintf("weight_map lists tensor %q in %s, but that shard does not hold it", name, shard)}
		}
		if got := filepath.Base(s.Files[fi].Path); got != shard {
			return nil, &Error{Path: path, Offset: -1, Err: ErrCorrupt,
				Msg: fmt.Sprintf("weight_map lists tensor %q in %s, but it is in %s", name, shard, got)}
		}
	}
	for _, f := range files {
		for _, t := range f.Tensors {
			if _, ok := idx.WeightMap[t.Name]; !ok {
				return nil, &Error{Path: path, Offset: -1, Err: ErrCorrupt,
					Msg: fmt.Sprintf("tensor %q in shard %s is not in weight_map", t.Name, filepath.Base(f.Path))}
			}
		}
	}
	for i, f := range files {
		for _, t := range f.Tensors {
			if s.loc[t.Name] != i {
				other := s.Files[s.loc[t.Name]].Path
				return nil, &Error{Path: path, Offset: -1, Err: ErrCorrupt,
					Msg: fmt.Sprintf("tensor %q appears in both %s and %s", t.Name, filepath.Base(f.Path), filepath.Base(other))}
			}
		}
	}
	return s, nil
}

func newSet(files []*File) *Set {
	s := &Set{Files: files, loc: map[string]int{}}
	for i, f := range files {
		for _, t := range f.Tensors {
			if _, dup := s.loc[t.Name]; !dup {
				s.loc[t.Name] = i
			}
		}
	}
	return s
}

// Tensor returns which file holds the named tensor and its index entry.
func (s *Set) Tensor(name string) (file int, info tensor.Info, ok bool) {
	fi, ok := s.loc[name]
	if !ok {
		return 0, tensor.Info{}, false
	}
	info, ok = s.Files[fi].Tensor(name)
	return fi, info, ok
}

// Names lists every tensor name, sorted.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.loc))
	for n := range s.loc {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// ReadF32 reads the named tensor from whichever shard holds it.
func (s *Set) ReadF32(name string) ([]float32, error) {
	fi, ok := s.loc[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: no tensor %q in %d file(s): %w", name, len(s.Files), os.ErrNotExist)
	}
	return s.Files[fi].ReadF32(name)
}

// WriteIndex writes idx as a model.safetensors.index.json at path.
func WriteIndex(path string, idx Index) error {
	data, err := json.MarshalIndent(idx, "", "  ")
	if err != nil {
		return fmt.Errorf("safetensors: index %s: %w", path, err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}
