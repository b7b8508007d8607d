package apply

import "testing"

func BenchmarkInSync(b *testing.B) {
	benchmarks := []struct {
		name              string
		desired, observed string
	}{
		{"service", serviceFromHook, serviceFromServer},
		{"pod-3-containers", podFromHook, podFromServer},
		{"pod-with-admission-items", podWithVolumesFromHook, podWithVolumesFromServer},
	}
	for _, bm := range benchmarks {
		desired, observed := fromHook(b, bm.desired), fromServer(b, bm.observed)
		if !InSync(desired, observed) {
			b.Fatalf("%s: fixtures not in sync: %v", bm.name, Diff(desired, observed))
		}
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				InSync(desired, observed)
			}
		})
	}
}

func BenchmarkDiff(b *testing.B) {
	desired := set(b, fromHook(b, podFromHook), "example.com/app:9", "spec", "containers", 0, "image")
	observed := fromServer(b, podFromServer)
	b.ReportAllocs()
	for b.Loop() {
		Diff(desired, observed)
	}
}

func BenchmarkThreeWayMerge(b *testing.B) {
	desired, observed, last := fromHook(b, podFromHook), fromServer(b, podFromServer), fromHook(b, podFromHook)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ThreeWayMerge(observed, last, desired); err != nil {
			b.Fatal(err)
		}
	}
}
