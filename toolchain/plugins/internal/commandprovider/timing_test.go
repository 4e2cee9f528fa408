package commandprovider

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
)

func TestTimingLog(t *testing.T) {
	s := newTestSSHServer(t)
	p, _ := newTestProvider(t)
	// Unset: nothing is written (and nothing fails).
	t.Setenv(TimingLogEnv, "")
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("true")})

	file := filepath.Join(t.TempDir(), "timing.jsonl")
	t.Setenv(TimingLogEnv, file)
	mustCreate(t, p, resource.PropertyMap{"connection": connectionTo(s, nil), "create": str("sleep 0.3; echo done")})
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 1 {
		t.Fatalf("timing log has %d lines, want 1: %q", len(lines), data)
	}
	var got scriptTiming
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.URN, "urn:pulumi:") || got.Failed {
		t.Errorf("timing = %+v", got)
	}
	if !(got.Dial > 0 && got.Dial <= got.Start && got.End-got.Start >= 0.3 && got.End-got.Start < 10) {
		t.Errorf("dial %.3f, start %.3f, end %.3f: the script slept 0.3 s", got.Dial, got.Start, got.End)
	}
}
