package commandprovider

import (
	"context"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
)

const randomSecretURN = "urn:pulumi:dev::spark-cluster::spark-remote:index:RandomSecret::dev-root-secret"

func checkSecret(t *testing.T, p *Provider, news resource.PropertyMap) (resource.PropertyMap, []*pulumirpc.CheckFailure) {
	t.Helper()
	resp, err := p.Check(context.Background(), &pulumirpc.CheckRequest{
		Urn: randomSecretURN, Type: RandomSecretToken, Name: "dev-root-secret", News: mustMarshal(t, news),
	})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return mustUnmarshal(t, resp.GetInputs()), resp.GetFailures()
}

func createSecret(t *testing.T, p *Provider, inputs resource.PropertyMap, preview bool) resource.PropertyMap {
	t.Helper()
	resp, err := p.Create(context.Background(), &pulumirpc.CreateRequest{
		Urn: randomSecretURN, Type: RandomSecretToken, Name: "dev-root-secret", Properties: mustMarshal(t, inputs), Preview: preview,
	})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if !strings.HasPrefix(resp.GetId(), "dev-root-secret") {
		t.Fatalf("id %q", resp.GetId())
	}
	return mustUnmarshal(t, resp.GetProperties())
}

func TestRandomSecretCheck(t *testing.T) {
	p, _ := newTestProvider(t)
	inputs, failures := checkSecret(t, p, resource.PropertyMap{})
	if len(failures) != 0 || inputs["bytes"].NumberValue() != 32 {
		t.Fatalf("defaults: %v %v", inputs, failures)
	}
	for _, tc := range []struct {
		news resource.PropertyMap
		path string
		want string
	}{
		{resource.PropertyMap{"bytes": resource.NewNumberProperty(8)}, "bytes", "must be 16 to 64 bytes, not 8"},
		{resource.PropertyMap{"bytes": resource.NewNumberProperty(65)}, "bytes", "must be 16 to 64 bytes, not 65"},
		{resource.PropertyMap{"bytes": str("32")}, "bytes", "a number"},
		{resource.PropertyMap{"generation": resource.NewNumberProperty(2)}, "generation", "a string"},
		{resource.PropertyMap{"value": str("chosen")}, "value", "is not an input"},
	} {
		_, failures := checkSecret(t, p, tc.news)
		if len(failures) != 1 || failures[0].GetProperty() != tc.path || !strings.Contains(failures[0].GetReason(), tc.want) {
			t.Errorf("Check(%v) = %v, want one failure of %s containing %q", tc.news, failures, tc.path, tc.want)
		}
	}
}

func TestRandomSecretCreateIsRandomSecretAndTouchesNothing(t *testing.T) {
	p, _ := newTestProvider(t)
	inputs, _ := checkSecret(t, p, resource.PropertyMap{"generation": str("1")})
	preview := createSecret(t, p, inputs, true)
	if !preview["value"].ContainsUnknowns() {
		t.Fatalf("a preview's value is unknown, got %v", preview["value"])
	}
	a := createSecret(t, p, inputs, false)
	b := createSecret(t, p, inputs, false)
	if !a["value"].IsSecret() {
		t.Fatalf("the value is a secret output, got %v", a["value"])
	}
	va, vb := plain(t, a["value"]), plain(t, b["value"])
	if raw, err := hex.DecodeString(va); err != nil || len(raw) != 32 {
		t.Fatalf("32 bytes in hex, got %q (%v)", va, err)
	}
	if va == vb {
		t.Fatal("two creates drew the same value")
	}
	if plain(t, a["generation"]) != "1" || a["bytes"].NumberValue() != 32 {
		t.Fatalf("the inputs are kept in the state: %v", a)
	}
	// Read changes nothing; Delete has nothing to do.
	read, err := p.Read(context.Background(), &pulumirpc.ReadRequest{
		Id: "dev-root-secret-1", Urn: randomSecretURN, Type: RandomSecretToken,
		Properties: mustMarshal(t, a), Inputs: mustMarshal(t, inputs),
	})
	if err != nil || plain(t, mustUnmarshal(t, read.GetProperties())["value"]) != va {
		t.Fatalf("Read: %v %v", read, err)
	}
	if _, err := p.Delete(context.Background(), &pulumirpc.DeleteRequest{
		Id: "dev-root-secret-1", Urn: randomSecretURN, Type: RandomSecretToken, Properties: mustMarshal(t, a),
	}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
}

func TestRandomSecretDiffReplacesOnGenerationOrSize(t *testing.T) {
	p, _ := newTestProvider(t)
	diffOf := func(olds, news resource.PropertyMap) *pulumirpc.DiffResponse {
		resp, err := p.Diff(context.Background(), &pulumirpc.DiffRequest{
			Id: "dev-root-secret-1", Urn: randomSecretURN, Type: RandomSecretToken,
			Olds: mustMarshal(t, olds), OldInputs: mustMarshal(t, olds), News: mustMarshal(t, news),
		})
		if err != nil {
			t.Fatalf("Diff: %v", err)
		}
		return resp
	}
	one := resource.PropertyMap{"bytes": resource.NewNumberProperty(32), "generation": str("1")}
	if d := diffOf(one, one); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("same inputs: %v", d)
	}
	withValue := one.Copy()
	withValue["value"] = secret(str("ab"))
	if d := diffOf(withValue, one); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("the value is no input: %v", d)
	}
	two := resource.PropertyMap{"bytes": resource.NewNumberProperty(32), "generation": str("2")}
	if d := diffOf(one, two); d.GetChanges() != pulumirpc.DiffResponse_DIFF_SOME || strings.Join(d.GetReplaces(), ",") != "generation" {
		t.Fatalf("a new generation replaces: %v", d)
	}
	bigger := resource.PropertyMap{"bytes": resource.NewNumberProperty(48), "generation": str("1")}
	if d := diffOf(one, bigger); strings.Join(d.GetReplaces(), ",") != "bytes" {
		t.Fatalf("a new size replaces: %v", d)
	}
	if d := diffOf(resource.PropertyMap{}, resource.PropertyMap{"bytes": resource.NewNumberProperty(32)}); d.GetChanges() != pulumirpc.DiffResponse_DIFF_NONE {
		t.Fatalf("the default size is 32: %v", d)
	}
}

func TestRandomSecretUpdateKeepsTheValue(t *testing.T) {
	p, _ := newTestProvider(t)
	olds := resource.PropertyMap{"bytes": resource.NewNumberProperty(32), "value": secret(str("abcd"))}
	resp, err := p.Update(context.Background(), &pulumirpc.UpdateRequest{
		Id: "dev-root-secret-1", Urn: randomSecretURN, Type: RandomSecretToken,
		Olds: mustMarshal(t, olds), News: mustMarshal(t, resource.PropertyMap{"bytes": resource.NewNumberProperty(32)}),
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if out := mustUnmarshal(t, resp.GetProperties()); plain(t, out["value"]) != "abcd" || !out["value"].IsSecret() {
		t.Fatalf("Update: %v", out)
	}
}
