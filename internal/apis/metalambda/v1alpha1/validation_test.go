package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidateEnvSources(t *testing.T) {
	secret := &EnvSourceRef{Name: "db"}
	for _, tt := range []struct {
		name string
		spec FunctionSpec
		want []string // one substring per error, in order
	}{
		{"none", FunctionSpec{}, nil},
		{"secret and config map", FunctionSpec{
			EnvFrom:      []EnvFromSource{{SecretRef: secret}, {ConfigMapRef: &EnvSourceRef{Name: "settings", Optional: true}, Prefix: "CFG_"}},
			EnvValueFrom: map[string]EnvVarSource{"PASSWORD": {SecretKeyRef: &KeyRef{Name: "db", Key: "password"}}, "MODE": {ConfigMapKeyRef: &KeyRef{Name: "settings", Key: "app.mode"}}},
			Env:          map[string]string{"OTHER": "x"},
		}, nil},
		{"empty entry", FunctionSpec{EnvFrom: []EnvFromSource{{}}}, []string{"spec.envFrom[0]: Required value: one of secretRef and configMapRef"}},
		{"both refs", FunctionSpec{EnvFrom: []EnvFromSource{{SecretRef: secret}, {SecretRef: secret, ConfigMapRef: secret}}}, []string{"spec.envFrom[1].configMapRef: Forbidden: may not be set with secretRef"}},
		{"empty name", FunctionSpec{EnvFrom: []EnvFromSource{{SecretRef: &EnvSourceRef{}}}}, []string{"spec.envFrom[0].secretRef.name: Required value"}},
		{"bad name", FunctionSpec{EnvFrom: []EnvFromSource{{ConfigMapRef: &EnvSourceRef{Name: "Not_A_Name"}}}}, []string{`spec.envFrom[0].configMapRef.name: Invalid value: "Not_A_Name"`}},
		{"bad prefix", FunctionSpec{EnvFrom: []EnvFromSource{{Prefix: "A=", SecretRef: secret}}}, []string{`spec.envFrom[0].prefix: Invalid value: "A="`}},
		{"too many", FunctionSpec{EnvFrom: make([]EnvFromSource, MaxEnvFrom+1)}, []string{"spec.envFrom: Too many: 65"}},
		{"value without source", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"A": {}}}, []string{"spec.envValueFrom[A]: Required value: one of secretKeyRef and configMapKeyRef"}},
		{"value with both", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"A": {SecretKeyRef: &KeyRef{Name: "a", Key: "k"}, ConfigMapKeyRef: &KeyRef{Name: "a", Key: "k"}}}}, []string{"spec.envValueFrom[A].configMapKeyRef: Forbidden"}},
		{"value without key", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"A": {SecretKeyRef: &KeyRef{Name: "a"}}}}, []string{"spec.envValueFrom[A].secretKeyRef.key: Required value"}},
		{"bad key", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"A": {ConfigMapKeyRef: &KeyRef{Name: "a", Key: "a/b"}}}}, []string{`spec.envValueFrom[A].configMapKeyRef.key: Invalid value: "a/b"`}},
		{"bad variable name", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"A=B": {SecretKeyRef: &KeyRef{Name: "a", Key: "k"}}}}, []string{`spec.envValueFrom[A=B]: Invalid value: "A=B"`}},
		{"loader variable in env", FunctionSpec{Env: map[string]string{"LD_PRELOAD": "/tmp/x.so", "OK": "1"}}, []string{`spec.env[LD_PRELOAD]: Invalid value: "LD_PRELOAD": variable LD_PRELOAD is reserved: names that steer the dynamic loader or the C library`}},
		{"C library variable from a key", FunctionSpec{EnvValueFrom: map[string]EnvVarSource{"GCONV_PATH": {SecretKeyRef: &KeyRef{Name: "a", Key: "k"}}}}, []string{"spec.envValueFrom[GCONV_PATH]: Invalid value: \"GCONV_PATH\": variable GCONV_PATH is reserved"}},
		{"loader prefix", FunctionSpec{EnvFrom: []EnvFromSource{{Prefix: "LD_", SecretRef: secret}}}, []string{`spec.envFrom[0].prefix: Invalid value: "LD_": variable LD_ is reserved`}},
		{"malloc tunable", FunctionSpec{Env: map[string]string{"MALLOC_PERTURB_": "1", "GLIBC_TUNABLES": "x"}}, []string{"spec.env[GLIBC_TUNABLES]", "spec.env[MALLOC_PERTURB_]"}},
		{"too many variables", FunctionSpec{Env: manyVars(MaxEnv + 1)}, []string{"spec.env: Too many: 513"}},
		{"also in env", FunctionSpec{Env: map[string]string{"A": "1"}, EnvValueFrom: map[string]EnvVarSource{"A": {SecretKeyRef: &KeyRef{Name: "a", Key: "k"}}}}, []string{"spec.envValueFrom[A]: Invalid value: \"A\": also set in spec.env"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateEnvSources(&tt.spec)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors = %v, want %d: %q", errs, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if got := errs[i].Error(); !strings.Contains(got, want) {
					t.Errorf("error %d = %q, want it to contain %q", i, got, want)
				}
			}
		})
	}
}

func manyVars(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("V%d", i)] = "x"
	}
	return m
}

func TestValidateRollout(t *testing.T) {
	limit := func(n int32) *int32 { return &n }
	for _, tt := range []struct {
		name string
		spec FunctionSpec
		want []string // one substring per error, in order
	}{
		{"none", FunctionSpec{}, nil},
		{"default steps", FunctionSpec{Rollout: &RolloutPolicy{PauseSeconds: 30, MaxFailures: 2}}, nil},
		{"steps", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{1, 25, 100}}}, nil},
		{"only 100", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{100}}}, nil},
		{"last not 100", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{10, 50}}}, []string{"spec.rollout.steps[1]: Invalid value: 50: the last step must be 100"}},
		{"not increasing", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{50, 10, 100}}}, []string{"spec.rollout.steps[1]: Invalid value: 10: steps must increase: 10 follows 50"}},
		{"repeated", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{10, 10, 100}}}, []string{"spec.rollout.steps[1]: Invalid value: 10: steps must increase"}},
		{"zero", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{0, 100}}}, []string{"spec.rollout.steps[0]: Invalid value: 0: a step is a share in percent, between 1 and 100"}},
		{"over 100", FunctionSpec{Rollout: &RolloutPolicy{Steps: []int32{10, 150}}}, []string{"spec.rollout.steps[1]: Invalid value: 150: a step is a share", "the last step must be 100"}},
		{"too many steps", FunctionSpec{Rollout: &RolloutPolicy{Steps: make([]int32, MaxRolloutSteps+1)}}, []string{"spec.rollout.steps: Too many: 21"}},
		{"negative pause", FunctionSpec{Rollout: &RolloutPolicy{PauseSeconds: -1}}, []string{"spec.rollout.pauseSeconds: Invalid value: -1"}},
		{"negative failures", FunctionSpec{Rollout: &RolloutPolicy{MaxFailures: -1}}, []string{"spec.rollout.maxFailures: Invalid value: -1: must not be negative"}},
		{"negative history limit", FunctionSpec{RevisionHistoryLimit: limit(-1)}, []string{"spec.revisionHistoryLimit: Invalid value: -1"}},
		{"zero history limit", FunctionSpec{RevisionHistoryLimit: limit(0)}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := ValidateRollout(&tt.spec)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors = %v, want %d: %q", errs, len(tt.want), tt.want)
			}
			for i, want := range tt.want {
				if got := errs[i].Error(); !strings.Contains(got, want) {
					t.Errorf("error %d = %q, want it to contain %q", i, got, want)
				}
			}
		})
	}
}

func TestRevisionSpecKeepsWhatACallRuns(t *testing.T) {
	limit := int32(3)
	on := true
	spec := FunctionSpec{Runtime: "python", Source: "x", Handler: "h", TimeoutSeconds: 5, Env: map[string]string{"A": "1"}, Network: true,
		History: &FunctionHistory{Enabled: &on}, Rollout: &RolloutPolicy{PauseSeconds: 1}, RevisionHistoryLimit: &limit}
	rev := spec.RevisionSpec()
	if rev.History != nil || rev.Rollout != nil || rev.RevisionHistoryLimit != nil {
		t.Errorf("RevisionSpec kept settings that do not change a call: %+v", rev)
	}
	if rev.Source != "x" || rev.Handler != "h" || rev.TimeoutSeconds != 5 || rev.Env["A"] != "1" || !rev.Network {
		t.Errorf("RevisionSpec lost what a call runs: %+v", rev)
	}
	current := FunctionSpec{Runtime: "javascript", Source: "y", History: spec.History, Rollout: spec.Rollout, RevisionHistoryLimit: &limit}
	back := current.WithRevision(rev)
	if back.Source != "x" || back.Runtime != "python" || back.Rollout != spec.Rollout || back.RevisionHistoryLimit != &limit {
		t.Errorf("WithRevision = %+v", back)
	}
}
