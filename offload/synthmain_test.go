package offload_test

import (
	"os"
	"testing"

	"github.com/sluicehq/sluice/internal/testutil/synthfile"
)

// TestMain removes the synthetic models the tests wrote.
func TestMain(m *testing.M) { os.Exit(synthfile.Main(m)) }
