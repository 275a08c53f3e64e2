package batch_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/sluicehq/sluice/batch"
)

func Example() {
	prompts := `{"custom_id": "a", "prompt": "Once upon a time"}
{"custom_id": "b", "prompt": }
{"custom_id": "c", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8}
`
	r := batch.NewReader(strings.NewReader(prompts), "prompts.jsonl", batch.Auto)
	w := batch.NewWriter(os.Stdout)
	for {
		req, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		res := batch.Result{CustomID: req.CustomID}
		if req.Err != nil {
			res.Error = req.Err.Error() // one bad line never stops the batch
		} else {
			res.Text = fmt.Sprintf("[%d bytes of prompt]", len(req.Text()))
		}
		if err := w.Write(res); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Output:
	// {"custom_id":"a","text":"[16 bytes of prompt]","prompt_tokens":0,"completion_tokens":0}
	// {"custom_id":"line-2","prompt_tokens":0,"completion_tokens":0,"error":"prompts.jsonl:2: invalid JSON: invalid character '}' looking for beginning of value (at byte 30)"}
	// {"custom_id":"c","text":"[19 bytes of prompt]","prompt_tokens":0,"completion_tokens":0}
}
