package commandprovider

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/emptypb"
)

// A RandomSecret (spark-remote:index:RandomSecret) is a secret drawn once from the operating system's random source
// when the resource is created and kept, encrypted, in the stack's state: the root the program derives the cluster's
// internal secrets from (the Ray token, the model sync's rsync secret, Open WebUI's session key), so that nothing a
// client of the API holds computes them. It touches no host. A change of `generation` (or `bytes`) replaces it: that
// is how the secrets are rotated.

const (
	randomSecretBytes       resource.PropertyKey = "bytes"
	randomSecretGeneration  resource.PropertyKey = "generation"
	randomSecretValue       resource.PropertyKey = "value"
	randomSecretDefaultSize                      = 32
	randomSecretMinSize                          = 16
	randomSecretMaxSize                          = 64
)

// randomSecretInputs are the resource's inputs; a change of any of them replaces it.
var randomSecretInputs = []resource.PropertyKey{randomSecretBytes, randomSecretGeneration}

func (p *Provider) checkRandomSecret(req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	var failures checkFailures
	fail, failErr := failures.add, failures.addErr
	checked := resource.PropertyMap{}
	for k := range news {
		if k != randomSecretBytes && k != randomSecretGeneration && !strings.HasPrefix(string(k), "__") {
			fail(string(k), fmt.Sprintf("is not an input of %s (only bytes and generation)", RandomSecretToken))
		}
	}
	if n, err := optInt(news, randomSecretBytes, string(randomSecretBytes), randomSecretDefaultSize); err != nil {
		failErr(err)
	} else if n < randomSecretMinSize || n > randomSecretMaxSize {
		fail(string(randomSecretBytes), fmt.Sprintf("must be %d to %d bytes, not %d", randomSecretMinSize, randomSecretMaxSize, n))
	} else {
		checked[randomSecretBytes] = resource.NewNumberProperty(float64(n))
	}
	if s, err := optString(news, randomSecretGeneration, string(randomSecretGeneration)); err != nil {
		failErr(err)
	} else if s != nil {
		checked[randomSecretGeneration] = resource.NewStringProperty(*s)
	}
	inputs, err := marshal("inputs", checked)
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CheckResponse{Inputs: inputs, Failures: failures}, nil
}

func (p *Provider) diffRandomSecret(req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds, err := oldInputsOf(req)
	if err != nil {
		return nil, err
	}
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	var replaces []string
	for _, k := range randomSecretInputs {
		o, n := stripSecrets(olds[k]), stripSecrets(news[k])
		if k == randomSecretBytes {
			if o.IsNull() {
				o = resource.NewNumberProperty(randomSecretDefaultSize)
			}
			if n.IsNull() {
				n = resource.NewNumberProperty(randomSecretDefaultSize)
			}
		}
		if !o.DeepEquals(n) {
			replaces = append(replaces, string(k))
		}
	}
	if len(replaces) == 0 {
		return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
	}
	return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_SOME, Replaces: replaces, Diffs: replaces}, nil
}

// randomSecretState is the state of a RandomSecret: its inputs and the value, marked secret.
func randomSecretState(inputs resource.PropertyMap, value resource.PropertyValue) resource.PropertyMap {
	state := resource.PropertyMap{}
	for _, k := range randomSecretInputs {
		if v, ok := inputs[k]; ok {
			state[k] = v
		}
	}
	state[randomSecretValue] = ensureSecret(value)
	return state
}

func (p *Provider) createRandomSecret(req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	news, id, err := createInputs(req)
	if err != nil {
		return nil, err
	}
	if req.GetPreview() {
		props, err := marshal("properties", randomSecretState(news, computedString()))
		if err != nil {
			return nil, err
		}
		return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
	}
	n, err := optInt(news, randomSecretBytes, string(randomSecretBytes), randomSecretDefaultSize)
	if err != nil {
		return nil, inputError("bytes", err)
	}
	if n < randomSecretMinSize || n > randomSecretMaxSize {
		return nil, fmt.Errorf("invalid bytes of %s: %d, not %d to %d", RandomSecretToken, n, randomSecretMinSize, randomSecretMaxSize)
	}
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return nil, fmt.Errorf("reading the random source for %s: %w", resourceName(req.GetName(), req.GetUrn()), err)
	}
	props, err := marshal("properties", randomSecretState(news, resource.NewStringProperty(hex.EncodeToString(buf))))
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: props}, nil
}

// readRandomSecret: there is nothing to read back; the state is the secret.
func (p *Provider) readRandomSecret(req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	return &pulumirpc.ReadResponse{Id: req.GetId(), Properties: req.GetProperties(), Inputs: req.GetInputs()}, nil
}

// updateRandomSecret keeps the value: every input change replaces, so an update only carries the same inputs on.
func (p *Provider) updateRandomSecret(req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	olds, err := unmarshal("olds", req.GetOlds())
	if err != nil {
		return nil, err
	}
	news, err := unmarshal("news", req.GetNews())
	if err != nil {
		return nil, err
	}
	value, ok := olds[randomSecretValue]
	if !ok || value.IsNull() {
		return nil, fmt.Errorf("%s has no value in its state: replace it (pulumi up --replace)", resourceName("", req.GetUrn()))
	}
	props, err := marshal("properties", randomSecretState(news, value))
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: props}, nil
}

// deleteRandomSecret: the value goes with the state.
func (p *Provider) deleteRandomSecret(*pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}
