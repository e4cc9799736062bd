package nexusserve

import (
	"context"
	"fmt"
	"regexp"

	nexuspb "go.temporal.io/api/nexus/v1"
	"go.temporal.io/api/operatorservice/v1"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// endpointPattern is what Temporal (v1.32) takes as an endpoint's name: a
// letter, then letters, digits and '-', ending with a letter or digit.
var endpointPattern = regexp.MustCompile(`^[a-zA-Z]([a-zA-Z0-9-]{0,198}[a-zA-Z0-9])?$`)

// CheckEndpointName says why Temporal would refuse name for a Nexus
// endpoint, or nil.
func CheckEndpointName(name string) error {
	if !endpointPattern.MatchString(name) {
		return fmt.Errorf("nexus endpoint name %.80q: want a letter, then letters, digits or '-', ending with a letter or digit (at most 200; no '_' or '.'), as in toolgate or toolgate-prod", name)
	}
	return nil
}

// Endpoint is a Nexus endpoint as CreateEndpoint leaves it.
type Endpoint struct {
	Name, Namespace, TaskQueue string
	// Created: this call created it (else it was there, with this target).
	Created bool
}

// description is the endpoint's description, shown by the UI and the CLI.
const description = "toolgate: gated, memoized, exactly-once tool calls (service `toolgate`, operations `call` and `run`)"

// CreateEndpoint makes sure the Nexus endpoint name routes to the worker of
// taskQueue in namespace: it creates it, or finds it there with that target.
// One with another target is left alone and refused: an endpoint is an
// operator's choice of who may call what, not toolgate's to move.
func CreateEndpoint(ctx context.Context, tc sdkclient.Client, name, namespace, taskQueue string) (Endpoint, error) {
	ep := Endpoint{Name: name, Namespace: namespace, TaskQueue: taskQueue}
	if err := CheckEndpointName(name); err != nil {
		return ep, err
	}
	if namespace == "" || taskQueue == "" {
		return ep, fmt.Errorf("nexus endpoint %s: a target namespace and task queue are required", name)
	}
	os := tc.OperatorService()
	list, err := os.ListNexusEndpoints(ctx, &operatorservice.ListNexusEndpointsRequest{Name: name, PageSize: 1})
	if err != nil {
		return ep, fmt.Errorf("listing nexus endpoint %s: %w", name, err)
	}
	for _, e := range list.GetEndpoints() {
		if e.GetSpec().GetName() != name {
			continue
		}
		w := e.GetSpec().GetTarget().GetWorker()
		if w.GetNamespace() == namespace && w.GetTaskQueue() == taskQueue {
			return ep, nil
		}
		return ep, fmt.Errorf("nexus endpoint %s exists and routes to %s; it was left as it is (delete it with `temporal operator nexus endpoint delete --name %s`, or pick another name)",
			name, describeTarget(e.GetSpec().GetTarget()), name)
	}
	desc, err := converter.GetDefaultDataConverter().ToPayload(description)
	if err != nil {
		return ep, fmt.Errorf("nexus endpoint %s: %w", name, err)
	}
	_, err = os.CreateNexusEndpoint(ctx, &operatorservice.CreateNexusEndpointRequest{Spec: &nexuspb.EndpointSpec{
		Name: name, Description: desc,
		Target: &nexuspb.EndpointTarget{Variant: &nexuspb.EndpointTarget_Worker_{Worker: &nexuspb.EndpointTarget_Worker{
			Namespace: namespace, TaskQueue: taskQueue}}},
	}})
	if err != nil {
		return ep, fmt.Errorf("creating nexus endpoint %s (namespace %s, task queue %s): %w", name, namespace, taskQueue, err)
	}
	ep.Created = true
	return ep, nil
}

func describeTarget(t *nexuspb.EndpointTarget) string {
	if w := t.GetWorker(); w != nil {
		return fmt.Sprintf("namespace %s, task queue %s", w.GetNamespace(), w.GetTaskQueue())
	}
	if e := t.GetExternal(); e != nil {
		return "the external URL " + e.GetUrl()
	}
	return "another target"
}
