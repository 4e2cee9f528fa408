package main

import "testing"

// The engine starts every plugin with its logging flags under `pulumi --logflow -v=N
// --logtostderr`; the host must accept them and still find the engine's address.
func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"--logtostderr", "-v=9", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"-v=9", "--logflow", "--tracing", "http://127.0.0.1:9411", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{[]string{"--typescript=false", "--root=/x", "127.0.0.1:4000"}, "127.0.0.1:4000"},
		{nil, ""},
	} {
		got, err := parseArgs(tc.args)
		if err != nil || got != tc.want {
			t.Errorf("parseArgs(%q) = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
	if _, err := parseArgs([]string{"--no-such-flag", "127.0.0.1:4000"}); err == nil {
		t.Errorf("parseArgs accepted an unknown flag")
	}
}
