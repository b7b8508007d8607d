package rollout

import "hash/fnv"

// Buckets is how many buckets the parents are spread over; a share of one percent
// is Buckets/100 of them.
const Buckets = 10000

// Bucket is the bucket of the parent with this UID: FNV-1a (64-bit) of the UID's
// bytes, modulo Buckets.
func Bucket(uid string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int(h.Sum64() % Buckets)
}

// Covered reports whether the parent with this UID is among the share (in percent)
// of parents a new revision serves when it is the newest of the live revisions:
// the parents a driver moves by setting that share.
func Covered(uid string, share int32) bool {
	return Bucket(uid) < int(share)*(Buckets/100)
}

// Choose returns the index, in shares (the live revisions' shares in percent,
// newest revision first), of the revision that serves the parent with this UID. A
// call without a UID (a plain invocation), and a bucket past the shares' sum, go to
// the revision with the largest share, ties to the older. Choose returns -1 for no
// shares.
func Choose(uid string, shares []int32) int {
	if uid != "" {
		bucket, end := Bucket(uid), 0
		for i, share := range shares {
			end += int(share) * (Buckets / 100)
			if bucket < end {
				return i
			}
		}
	}
	return Largest(shares)
}

// Largest is the index of the largest share, ties to the older (the later index);
// -1 for no shares.
func Largest(shares []int32) int {
	best := -1
	for i, share := range shares {
		if best < 0 || share >= shares[best] {
			best = i
		}
	}
	return best
}
