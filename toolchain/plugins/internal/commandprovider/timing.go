package commandprovider

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// TimingLogEnv names a file to which the provider appends one JSON line per remote script it runs:
// the resource's URN, when it began dialling the host, when the script started (the SSH exec
// request), when it ended (its exit status arrived) and whether it failed. Unset: nothing is
// written. A measurement aid (`npm run bench` sets it to split a run's wall time into time inside
// the scripts and time the program, the engine, this provider and SSH add); it changes no input,
// output or diff.
const TimingLogEnv = "SPARK_COMMAND_TIMING_LOG"

// scriptTiming is one line of the timing log; times are Unix seconds.
type scriptTiming struct {
	URN    string  `json:"urn"`
	Dial   float64 `json:"dial"`
	Start  float64 `json:"start"`
	End    float64 `json:"end"`
	Failed bool    `json:"failed,omitempty"`
}

var timingMu sync.Mutex

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// recordTiming appends one line to the timing log named by TimingLogEnv, if any. A log that
// cannot be written is skipped: timing never fails an operation.
func recordTiming(urn string, dial, start, end time.Time, failed bool) {
	path := os.Getenv(TimingLogEnv)
	if path == "" {
		return
	}
	line, err := json.Marshal(scriptTiming{URN: urn, Dial: unixSeconds(dial), Start: unixSeconds(start), End: unixSeconds(end), Failed: failed})
	if err != nil {
		return
	}
	timingMu.Lock()
	defer timingMu.Unlock()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.Write(append(line, '\n'))
}
