package main

import (
	"testing"
	"time"
)

func TestDueConditions(t *testing.T) {
	entries := []ResourceConditionAfter{
		{Time: "30s", ConditionType: "Ready", ConditionStatus: "True"},
		{Time: "60s", ConditionType: "Ready", ConditionStatus: "False"},
		{Time: "90s", ConditionType: "Ready", ConditionStatus: "True"},
		{Time: "90s", ConditionType: "Green", ConditionStatus: "True"},
		{Time: "bogus", ConditionType: "Blue", ConditionStatus: "True"},
	}
	due, next := dueConditions(entries, 10*time.Second)
	if len(due) != 0 || next != 20*time.Second {
		t.Fatalf("at 10s: due %v, next %v", due, next)
	}
	due, next = dueConditions(entries, 61*time.Second)
	if len(due) != 1 || due[0].ConditionStatus != "False" || next != 29*time.Second {
		t.Fatalf("at 61s: due %v, next %v", due, next)
	}
	due, next = dueConditions(entries, 100*time.Second)
	if len(due) != 2 || next != 0 {
		t.Fatalf("at 100s: due %v, next %v", due, next)
	}
	for _, e := range due {
		if e.ConditionType == "Ready" && e.ConditionStatus != "True" {
			t.Fatalf("at 100s: Ready is %s, want True", e.ConditionStatus)
		}
	}
}
