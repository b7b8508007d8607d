package defaults

import "testing"

func TestCheckNamesTheFirstOptionNotSet(t *testing.T) {
	if err := Check("ingress", "positive", Option{"HoldTimeout", true}); err != nil {
		t.Errorf("every option set: %v", err)
	}
	err := Check("ingress", "positive", Option{"HoldTimeout", true}, Option{"DialTimeout", false}, Option{"MaxHeld", false})
	if want := "ingress option DialTimeout must be positive (start the options from ingress.Defaults())"; err == nil || err.Error() != want {
		t.Errorf("Check = %v, want %q", err, want)
	}
}
