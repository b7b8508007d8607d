// Package rollout owns the choice of a Function's revision for a parent: the
// gateway serves each hook call by it, and a rollout driver computes with it which
// parents a share moves, so both agree without talking to each other.
//
// A parent's bucket is the FNV-1a (64-bit) hash of its UID modulo 10,000. A
// revision with a share of s percent covers s×100 buckets. The live revisions are
// laid out newest first from bucket 0: the newest covers [0, s₀×100), the next
// [s₀×100, (s₀+s₁)×100), and so on. A parent therefore sticks to its revision while
// the shares stay, and a parent that moved to the new revision at 10% is still on it
// at 50%.
//
// It also owns the controls a person has on a rollout (pause, resume, promote,
// abort) and which phase takes which (CheckAction), so that the gateway's API, the
// CLI and the dashboard agree.
package rollout
