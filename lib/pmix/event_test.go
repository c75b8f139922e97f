package pmix

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

// TestDynrtHeader: the codes and keys of libdynrt/include/dynrt_pmix.h,
// which programs include, are the ones the daemon uses.
func TestDynrtHeader(t *testing.T) {
	b, err := os.ReadFile("../../libdynrt/include/dynrt_pmix.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^#define (DYNRT_PMIX_\w+)[ \t]+(\S+)`).FindAllStringSubmatch(string(b), -1) {
		defs[m[1]] = m[2]
	}
	for name, want := range map[string]string{
		"DYNRT_PMIX_MALLEABLE": strconv.Itoa(CodeDynrtMalleable), "DYNRT_PMIX_RC": strconv.Itoa(CodeDynrtRC),
		"DYNRT_PMIX_ACCEPT": strconv.Itoa(CodeDynrtAccept), "DYNRT_PMIX_ACCEPTED": strconv.Itoa(CodeDynrtAccepted),
		"DYNRT_PMIX_CONFIRM": strconv.Itoa(CodeDynrtConfirm),
		"DYNRT_PMIX_RC_TYPE": `"` + KeyDynrtType + `"`, "DYNRT_PMIX_RC_STATUS": `"` + KeyDynrtStatus + `"`,
		"DYNRT_PMIX_RC_DELTA": `"` + KeyDynrtDelta + `"`, "DYNRT_PMIX_RC_BOUND": `"` + KeyDynrtBound + `"`,
		"DYNRT_PMIX_RC_ERROR": `"` + KeyDynrtError + `"`, "DYNRT_PMIX_JOB": `"` + KeyDynrtJob + `"`,
		"DYNRT_PMIX_BASE": `"` + KeyDynrtBase + `"`, "DYNRT_PMIX_RC_OUT": `"` + KeyDynrtOut + `"`,
	} {
		if defs[name] != want {
			t.Errorf("dynrt_pmix.h: %s is %q, want %q", name, defs[name], want)
		}
	}
	if len(defs) != 13 {
		t.Errorf("dynrt_pmix.h defines %d names with values, want the 13 above: %v", len(defs), defs)
	}
}
