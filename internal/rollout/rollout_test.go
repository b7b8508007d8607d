package rollout

import (
	"fmt"
	"strings"
	"testing"
)

func uids(n int) []string {
	out := make([]string, n)
	for i := range out {
		// The shape of a Kubernetes UID.
		out[i] = fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", i*2654435761%(1<<32), i%65536, i%4096, (i*7)%4096, i*11)
	}
	return out
}

func TestBucketIsStableAndInRange(t *testing.T) {
	// Pinned to FNV-1a's published values (offset basis 0xcbf29ce484222325 for "",
	// 0xaf63dc4c8601ec8c for "a"): a driver in another process must compute the
	// same buckets.
	for uid, want := range map[string]int{"": 6037, "a": 1996} {
		if got := Bucket(uid); got != want {
			t.Errorf("Bucket(%q) = %d, want %d", uid, got, want)
		}
	}
	for _, uid := range uids(1000) {
		if b := Bucket(uid); b < 0 || b >= Buckets {
			t.Fatalf("Bucket(%q) = %d, out of [0, %d)", uid, b, Buckets)
		}
		if again := Bucket(strings.Clone(uid)); again != Bucket(uid) {
			t.Fatalf("Bucket(%q) changes: %d then %d", uid, Bucket(uid), again)
		}
	}
}

// TestSharesAreRoughlyUniform: over 10,000 UIDs each share serves its percentage of
// parents, within 2 points.
func TestSharesAreRoughlyUniform(t *testing.T) {
	all := uids(10000)
	for _, share := range []int32{1, 10, 25, 50, 90, 100} {
		n := 0
		for _, uid := range all {
			if Choose(uid, []int32{share, 100 - share}) == 0 {
				n++
			}
		}
		got := float64(n) * 100 / float64(len(all))
		if d := got - float64(share); d < -2 || d > 2 {
			t.Errorf("share %d%% served %.2f%% of the parents", share, got)
		}
	}
	var deciles [10]int
	for _, uid := range all {
		deciles[Bucket(uid)/(Buckets/10)]++
	}
	for i, n := range deciles {
		if n < 900 || n > 1100 {
			t.Errorf("buckets %d-%d hold %d of 10000 UIDs, want about 1000", i*1000, i*1000+999, n)
		}
	}
}

// TestAParentThatMovedStays: a parent served by the new revision at a share stays
// on it at every larger share, and Covered agrees with Choose.
func TestAParentThatMovedStays(t *testing.T) {
	steps := []int32{0, 10, 50, 100}
	for _, uid := range uids(2000) {
		moved := false
		for _, share := range steps {
			onNew := Choose(uid, []int32{share, 100 - share}) == 0
			if moved && !onNew {
				t.Fatalf("parent %s moved back to the old revision at %d%%", uid, share)
			}
			if onNew != Covered(uid, share) {
				t.Fatalf("Covered(%s, %d) = %v, Choose says %v", uid, share, !onNew, onNew)
			}
			moved = onNew
		}
		if !moved {
			t.Fatalf("parent %s is not on the new revision at 100%%", uid)
		}
	}
}

func TestChooseWithoutAUID(t *testing.T) {
	for _, tc := range []struct {
		shares []int32
		want   int
	}{
		{nil, -1},
		{[]int32{100}, 0},
		{[]int32{0, 100}, 1},
		{[]int32{90, 10}, 0},
		{[]int32{50, 50}, 1}, // a tie goes to the older
		{[]int32{30, 40, 30}, 1},
	} {
		if got := Choose("", tc.shares); got != tc.want {
			t.Errorf("Choose(\"\", %v) = %d, want %d", tc.shares, got, tc.want)
		}
	}
}

func TestChooseLaysSharesOutNewestFirst(t *testing.T) {
	counts := make([]int, 3)
	for _, uid := range uids(10000) {
		counts[Choose(uid, []int32{20, 30, 50})]++
	}
	for i, want := range []int{2000, 3000, 5000} {
		if d := counts[i] - want; d < -250 || d > 250 {
			t.Errorf("revision %d served %d of 10000, want about %d", i, counts[i], want)
		}
	}
}
