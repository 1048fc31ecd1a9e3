package main

import "testing"

func TestTrialsPerScenario(t *testing.T) {
	for _, c := range []struct {
		name     string
		s        scenario
		asked    int
		expected int
	}{
		{"as asked", scenario{}, 1, 1},
		{"as asked, long form", scenario{}, 30, 30},
		{"capped where the steps run out", scenario{maxTrials: 2}, 30, 2},
		{"raised to what the scenario must cover", scenario{minTrials: 2, maxTrials: 2}, 1, 2},
		{"the minimum does not cap", scenario{minTrials: 2}, 5, 5},
	} {
		if got := c.s.trials(c.asked); got != c.expected {
			t.Errorf("%s: %d trials asked, %d run; want %d", c.name, c.asked, got, c.expected)
		}
	}
}

// The upgrade scenario is there for both of its steps, a minor and a patch upgrade: the short
// form must run them both.
func TestTheShortFormUpgradesBothSteps(t *testing.T) {
	for _, s := range allScenarios {
		if s.name == "upgrade" && s.trials(1) != len(upgradePath) {
			t.Fatalf("the upgrade scenario runs %d of its %d steps in the short form", s.trials(1), len(upgradePath))
		}
	}
}

// The archive scenario injects each of its faults once in the short form.
func TestTheShortFormArchivesUnderEveryFault(t *testing.T) {
	for _, s := range allScenarios {
		if s.name == "archive" && (!s.archive || s.trials(1) != len(archiveFaults)) {
			t.Fatalf("the archive scenario runs %d of its %d faults in the short form (archive %v)", s.trials(1), len(archiveFaults), s.archive)
		}
	}
}
