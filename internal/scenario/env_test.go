package scenario

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestEnvReferences: ${env.NAME} reads drill's environment; an unset or
// malformed name is a located validation error.
func TestEnvReferences(t *testing.T) {
	t.Setenv("DRILL_T_TOKEN", "t0ken-value")
	t.Setenv("DRILL_T_USER", "alice")
	src := strings.Replace(minimal, "url: http://${proxies.pg.addr}/",
		"url: http://${proxies.pg.addr}/?token=${env.DRILL_T_TOKEN}\n        headers: {X-Who: '${env.DRILL_T_USER}'}", 1)
	s := mustParse(t, src)
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if got := strings.Join(s.EnvRefs(), ","); got != "DRILL_T_TOKEN,DRILL_T_USER" {
		t.Errorf("EnvRefs = %s", got)
	}
	vars := s.EnvVars(os.LookupEnv)
	vars["proxies.pg.addr"] = "127.0.0.1:9"
	got, err := Expand(s.Streams[0].Targets[0].URL, vars)
	if err != nil || got != "http://127.0.0.1:9/?token=t0ken-value" {
		t.Errorf("Expand = %q, %v", got, err)
	}
	if len(s.EnvVars(func(string) (string, bool) { return "", false })) != 0 {
		t.Error("EnvVars kept a variable the lookup did not find")
	}

	located := regexp.MustCompile(`^t\.yaml:\d+:\d+: streams\[0\]\.targets\[0\]\.url: `)
	for _, tc := range []struct{ ref, want string }{
		{"${env.DRILL_T_UNSET}", "environment variable DRILL_T_UNSET is not set in drill's environment"},
		{"${env.9BAD}", "malformed reference ${env.9BAD}"},
	} {
		bad := mustParse(t, strings.Replace(minimal, "url: http://${proxies.pg.addr}/", "url: http://${proxies.pg.addr}/"+tc.ref, 1))
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !located.MatchString(err.Error()) {
			t.Errorf("%s: error %v, want a located one containing %q", tc.ref, err, tc.want)
		}
	}
}
