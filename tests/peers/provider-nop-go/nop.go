package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
)

// The external side of a NopResource is nothing. As in crossplane-rs's provider-nop
// (providers/provider-nop/src/external.rs), only Observe does anything: a resource being deleted is
// reported gone (so Delete is never called); otherwise, for each condition type, the latest
// conditionAfter entry whose time has come is set, the connection details are emitted, and the
// resource is reported existing and up to date (so Create and Update are never called). The poll
// interval hook brings the resource back when its next entry falls due.

const errNotNopResource = "managed resource is not a NopResource"

// connector connects to nothing.
type connector struct{}

// Connect returns the client of nothing.
func (connector) Connect(_ context.Context, mg resource.Managed) (managed.ExternalClient, error) {
	if _, ok := mg.(*NopResource); !ok {
		return nil, errors.New(errNotNopResource)
	}
	return external{}, nil
}

// external talks to nothing.
type external struct{}

// dueConditions returns the latest entry per condition type whose time has come at age elapsed, and
// how long until the next entry falls due (0 when none is left). Entries whose time does not parse as
// a Go duration are skipped.
func dueConditions(entries []ResourceConditionAfter, elapsed time.Duration) ([]ResourceConditionAfter, time.Duration) {
	type slot struct {
		at    time.Duration
		entry ResourceConditionAfter
	}
	latest := map[string]slot{}
	order := []string{}
	var next time.Duration
	for _, e := range entries {
		at, err := time.ParseDuration(e.Time)
		if err != nil {
			continue
		}
		if at > elapsed {
			if wait := at - elapsed; next == 0 || wait < next {
				next = wait
			}
			continue
		}
		s, seen := latest[e.ConditionType]
		if !seen {
			order = append(order, e.ConditionType)
		}
		if !seen || at >= s.at {
			latest[e.ConditionType] = slot{at: at, entry: e}
		}
	}
	due := make([]ResourceConditionAfter, 0, len(order))
	for _, t := range order {
		due = append(due, latest[t].entry)
	}
	return due, next
}

func age(cr *NopResource, now time.Time) time.Duration {
	if cr.CreationTimestamp.IsZero() {
		return 0
	}
	return now.Sub(cr.CreationTimestamp.Time)
}

// Observe sets the due conditions and copies spec.forProvider.fields to status.atProvider.fields.
func (external) Observe(_ context.Context, mg resource.Managed) (managed.ExternalObservation, error) {
	cr, ok := mg.(*NopResource)
	if !ok {
		return managed.ExternalObservation{}, errors.New(errNotNopResource)
	}
	if meta.WasDeleted(cr) {
		return managed.ExternalObservation{ResourceExists: false}, nil
	}
	now := time.Now()
	due, _ := dueConditions(cr.Spec.ForProvider.ConditionAfter, age(cr, now))
	for _, e := range due {
		cr.SetConditions(xpv2.Condition{
			Type:               xpv2.ConditionType(e.ConditionType),
			Status:             corev1.ConditionStatus(e.ConditionStatus),
			LastTransitionTime: metav1.NewTime(now),
			Reason:             xpv2.ConditionReason(e.ConditionReason),
		})
	}
	if f := cr.Spec.ForProvider.Fields; f != nil {
		cr.Status.AtProvider.Fields = f.DeepCopy()
	} else {
		cr.Status.AtProvider.Fields = nil
	}
	details := managed.ConnectionDetails{}
	for _, d := range cr.Spec.ForProvider.ConnectionDetails {
		details[d.Name] = []byte(d.Value)
	}
	return managed.ExternalObservation{
		ResourceExists:    true,
		ResourceUpToDate:  true,
		ConnectionDetails: details,
	}, nil
}

// Create is never called (Observe reports the resource existing).
func (external) Create(context.Context, resource.Managed) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

// Update is never called (Observe reports the resource up to date).
func (external) Update(context.Context, resource.Managed) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

// Delete is never called (Observe reports a deleted resource gone).
func (external) Delete(context.Context, resource.Managed) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

// Disconnect has nothing to close.
func (external) Disconnect(context.Context) error { return nil }

// pollAfter is the poll interval hook: the poll interval, or sooner (with 50 ms of slack) when the
// next conditionAfter entry falls due before it.
func pollAfter(mg resource.Managed, poll time.Duration) time.Duration {
	cr, ok := mg.(*NopResource)
	if !ok {
		return poll
	}
	_, next := dueConditions(cr.Spec.ForProvider.ConditionAfter, age(cr, time.Now()))
	if next > 0 && next+50*time.Millisecond < poll {
		return next + 50*time.Millisecond
	}
	return poll
}
